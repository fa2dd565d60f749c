"""Every architecture in mlx-lm's `models/` that a small config can build (tests/architectures/
catalog.py), saved as a real model folder in fp32 and as a 4-bit copy, runs each case of
tests/architectures/cases.py through the public Engine and matches `mlx_lm.generate` alone on
every row: a plain batch of four lengths, prompt lookup, a mix of methods, late joins, a draft
model, and a prompt-cache hit on a chat's next turn.

A case passes when every row has mlx_lm.generate's tokens, or a speculating row was refused at
once by a message naming the model and the method (or ran plain with a speculation_note). What
fails today is marked xfail(strict=True) in tests/architectures/known_failures.py with the exact
failure, so a fix shows up as XPASS and its mark is removed. The session writes every outcome
to artifacts/architectures.json; `python -m tests.architectures.report --from-json` turns it
into docs/architectures.md.
"""

from __future__ import annotations

import pytest

from tests.architectures.catalog import BY_NAME, HELPER_MODULES
from tests.architectures.known_failures import KNOWN_FAILURES
from tests.architectures.run import MatrixRun, matrix_cases, variant_skip


def _params() -> list:
    params = []
    for arch, variant, case in matrix_cases():
        marks = []
        skip = variant_skip(BY_NAME[arch], variant)
        if skip:
            marks.append(pytest.mark.skip(reason=f"not built: {skip}"))
        elif (arch, variant, case) in KNOWN_FAILURES:
            reason = KNOWN_FAILURES[(arch, variant, case)]
            marks.append(pytest.mark.xfail(strict=True, reason=reason))
        params.append(pytest.param(arch, variant, case, id=f"{arch}-{variant}-{case}", marks=marks))
    return params


@pytest.fixture(scope="module")
def matrix(request):
    run = MatrixRun()
    selected = [item.callspec.params for item in request.session.items if _is_case(item)]
    run.plan([(p["arch"], p["variant"], p["case"]) for p in selected])
    yield run
    run.write_json()
    run.close()


def test_the_catalogue_has_every_architecture_mlx_lm_has():
    import pkgutil

    import mlx_lm.models

    modules = {m.name for m in pkgutil.iter_modules(mlx_lm.models.__path__)} - HELPER_MODULES
    assert sorted(modules - set(BY_NAME)) == [], "add these to tests/architectures/catalog.py"
    assert sorted(set(BY_NAME) - modules) == [], "mlx-lm no longer has these"


def _is_case(item: pytest.Item) -> bool:
    return getattr(item, "originalname", None) == "test_architecture_case_matches_generate_alone"


@pytest.mark.parametrize("arch,variant,case", _params())
def test_architecture_case_matches_generate_alone(matrix, arch, variant, case):
    outcome = matrix.outcome(arch, variant, case)
    if not outcome.passed:
        pytest.fail(f"{arch} ({variant}) {case}: {outcome.summary()}", pytrace=False)
