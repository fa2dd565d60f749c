"""Cases of the architecture matrix that fail today, by cause, each with its exact
failure (wrong tokens: the row, the first wrong position, expected and got; errors: the
message). The matrix marks them xfail(strict=True): when a fix lands, the case passes, the
strict xfail fails, and its entry is removed here. Written by
`python -m tests.architectures.report --known-failures` from a run of the matrix."""

# fmt: off
KNOWN_FAILURES: dict[tuple[str, str, str], str] = {
}
# fmt: on
