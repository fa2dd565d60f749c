"""The benchmarks' and the draft trainer's command lines refuse numbers out of range at parse
time, as argparse's usage errors (exit code 2, the option named on stderr), before a model is
loaded or anything is run (engine/bench/cli_args.py)."""

from __future__ import annotations

import argparse
import json

import pytest

import engine.models
from engine.bench import (
    admission_trace,
    attention_check,
    cli_args,
    conv_check,
    gated_delta_check,
    layer_draft,
    matmul_check,
    nvrtc_check,
    part_timing,
    profile_ladder,
    profile_round,
    prompt_cache_publish,
    shape_cost,
    shared_step,
    two_models,
)
from engine.bench import options as bench
from engine.requests import MAX_DRAFT_TOKENS, MAX_MAX_TOKENS, MAX_NGRAM, MAX_PROMPT_TOKENS
from engine.train_draft import __main__ as train_draft
from engine.train_draft import evaluate

# (helper, values it takes, values it refuses, a bound its message names)
HELPERS = [
    (cli_args.positive_int, ["1", "+7", " 12 "], ["0", "-1", "1.5", "x", ""], ">= 1"),
    (cli_args.non_negative_int, ["0", "5"], ["-1", "0.0", "nan"], ">= 0"),
    (cli_args.positive_float, ["1e-9", "0.5", "3"], ["0", "-0.0", "-1e-9", "nan", "inf"], "> 0"),
    (cli_args.non_negative_float, ["0", "0.0", "2.5"], ["-1e-9", "-inf", "x"], ">= 0"),
    (cli_args.fraction, ["0", "1", "1.0", "0.7"], ["-0.001", "1.001", "nan", "2"], "0 to 1"),
    (cli_args.int_range(1, 16), ["1", "16"], ["0", "17"], "1 to 16"),
    (cli_args.float_at_least(1.0), ["1", "1.0", "3.5"], ["0.999", "nan", "inf"], ">= 1"),
]


@pytest.mark.parametrize(("helper", "good", "bad", "bound"), HELPERS)
def test_a_helper_takes_its_bounds_and_refuses_what_lies_just_outside(helper, good, bad, bound):
    for text in good:
        value = helper(text)
        assert value == type(value)(text)
    for text in bad:
        with pytest.raises(argparse.ArgumentTypeError) as refused:
            helper(text)
        assert "must be" in str(refused.value) and bound in str(refused.value), text


def test_a_hint_follows_an_out_of_range_value():
    draft_tokens = cli_args.int_range(1, 16, hint="for no drafting use --speculative off")
    with pytest.raises(argparse.ArgumentTypeError, match="got 0 .*--speculative off"):
        draft_tokens("0")


def test_admission_traces_gap_factor_is_none_or_at_least_1():
    assert admission_trace.gap_factor("none") is None and admission_trace.gap_factor("1") == 1.0
    with pytest.raises(argparse.ArgumentTypeError, match=">= 1"):
        admission_trace.gap_factor("0.5")


@pytest.fixture(autouse=True)
def nothing_heavy(monkeypatch):
    """A refused command line must stop before a model is loaded: loading one fails the test."""

    def loaded(*args, **kwargs):
        raise AssertionError("a model was loaded before the arguments were checked")

    monkeypatch.setattr(engine.models, "load_model", loaded)
    monkeypatch.setattr(profile_round, "load_any", loaded)
    monkeypatch.setattr(prompt_cache_publish, "load_model", loaded)
    monkeypatch.setattr(train_draft, "load", loaded)
    monkeypatch.setattr(train_draft, "ensure_default_model", loaded)
    monkeypatch.setattr("engine.default_model.ensure_default_model", loaded)


BENCH_CASES = [
    ("--concurrency", ["--concurrency", "4", "0"]),
    ("--max-tokens", ["--max-tokens", "-3", "--no-check"]),
    ("--max-tokens", ["--max-tokens", str(MAX_MAX_TOKENS + 1)]),
    ("--requests-per-slot", ["--requests-per-slot", "0"]),
    ("--draft-tokens", ["--speculative", "lookup", "--draft-tokens", "0"]),
    ("--draft-tokens", ["--speculative", "lookup", "--draft-tokens", str(MAX_DRAFT_TOKENS + 1)]),
    ("--ngram-min", ["--ngram-min", "0"]),
    ("--ngram-max", ["--ngram-max", str(MAX_NGRAM + 1)]),
    ("--ngram-min", ["--ngram-min", "3", "--ngram-max", "2"]),
    ("--ngram-min", ["--ngram-min", "6"]),  # over the default --ngram-max
    ("--acceptance", ["--speculative", "synthetic", "--acceptance", "0.9", "1.5"]),
    ("--acceptance", ["--speculative", "synthetic", "--acceptance", "-0.1"]),
    ("--repeats", ["--repeats", "0"]),
    ("--prefill-chunk", ["--prefill-chunk", "0"]),
    ("--long-tokens", ["--workload", "long-prompt", "--long-tokens", "0"]),
    ("--long-tokens", ["--long-tokens", str(MAX_PROMPT_TOKENS + 1)]),
    (
        "--draft-tokens",
        ["--workload", "long-prompt", "--speculative", "lookup", "--draft-tokens", "2", "3"],
    ),
    ("--repeats", ["--workload", "multiturn", "--repeats", "33"]),
]


def refused(run, argv: list[str], option: str, capsys) -> str:
    """The usage error `run(argv)` ends in: exit code 2, `option` named after "error:"."""
    with pytest.raises(SystemExit) as exit_:
        run(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "usage:" in err and option in err.split("error:", 1)[1], err
    return err


@pytest.mark.parametrize(("option", "argv"), BENCH_CASES)
def test_the_benchmark_refuses_each_number_out_of_range(option, argv, capsys):
    refused(bench.parse_args, argv, option, capsys)


def test_zero_draft_tokens_points_to_speculative_off(capsys):
    err = refused(bench.parse_args, ["--draft-tokens", "0"], "--draft-tokens", capsys)
    assert "1 to 16" in err and "--speculative off" in err


def test_the_benchmarks_defaults_and_bounds_pass():
    args = bench.parse_args([])
    assert args.max_tokens == bench.DEFAULT_MAX_TOKENS and args.draft_tokens == [4]
    args = bench.parse_args(["--acceptance", "0", "1", "--ngram-min", "4", "--ngram-max", "4"])
    assert args.acceptance == [0.0, 1.0] and args.ngram_min == args.ngram_max == 4
    assert bench.parse_args(["--draft-tokens", "1", str(MAX_DRAFT_TOKENS)]).draft_tokens[-1] == 16


def _train(argv: list[str]) -> int:
    return train_draft.main(["--out", "/nonexistent/train-draft-out", *argv])


# one CLI, an entry point that parses, the option, a bad command line; every numeric option
OTHER_CASES = [
    ("part_timing", part_timing.main, "--max-tokens", ["--max-tokens", "0"]),
    ("admission_trace", admission_trace.main, "--concurrency", ["--concurrency", "0"]),
    ("admission_trace", admission_trace.main, "--repeats", ["--repeats", "0"]),
    ("admission_trace", admission_trace.main, "--prefill-chunk", ["--prefill-chunk", "0"]),
    ("admission_trace", admission_trace.main, "--gap-factor", ["--gap-factor", "0.9"]),
    ("admission_trace", admission_trace.main, "--gap-factor", ["--gap-factor", "fast"]),
    ("admission_trace", admission_trace.main, "--prompt-tokens", ["--prompt-tokens", "0"]),
    ("profile_ladder", profile_ladder.parse_args, "--batch", ["--batch", "1", "0"]),
    ("profile_ladder", profile_ladder.parse_args, "--context", ["--context", "0"]),
    ("profile_ladder", profile_ladder.parse_args, "--context", ["--batch", "8", "--context", "6"]),
    ("profile_ladder", profile_ladder.parse_args, "--tokens", ["--tokens", "0"]),
    ("profile_ladder", profile_ladder.parse_args, "--repeats", ["--repeats", "0"]),
    ("profile_ladder", profile_ladder.parse_args, "--prefill-chunk", ["--prefill-chunk", "0"]),
    ("profile_round", profile_round.main, "--batch", ["--batch", "0"]),
    ("profile_round", profile_round.main, "--context", ["--context", "0"]),
    ("profile_round", profile_round.main, "--context", ["--batch", "4", "--context", "3"]),
    ("profile_round", profile_round.main, "--widths", ["--widths", "1", "0"]),
    ("shape_cost", shape_cost.main, "--context", ["--context", "0"]),
    ("shape_cost", shape_cost.main, "--chunks", ["--chunks", "64", "0"]),
    ("shared_step", shared_step.main, "--rows", ["--rows", "0"]),
    ("shared_step", shared_step.main, "--row-context", ["--row-context", "0"]),
    ("shared_step", shared_step.main, "--context", ["--context", "-1"]),
    ("shared_step", shared_step.main, "--chunks", ["--chunks", "0"]),
    ("shared_step", shared_step.main, "--repeats", ["--repeats", "0"]),
    ("matmul_check", matmul_check.main, "--repeats", ["--repeats", "0"]),
    ("matmul_check", matmul_check.main, "--rows", ["--rows", "1", "0"]),
    ("attention_check", attention_check.main, "--repeats", ["--repeats", "0"]),
    ("attention_check", attention_check.main, "--batches", ["--batches", "0"]),
    ("attention_check", attention_check.main, "--queries", ["--queries", "0"]),
    ("attention_check", attention_check.main, "--keys", ["--keys", "0"]),
    ("attention_check", attention_check.main, "--keys", ["--queries", "9", "--keys", "72"]),
    ("conv_check", conv_check.main, "--repeats", ["--repeats", "0"]),
    ("gated_delta_check", gated_delta_check.main, "--repeats", ["--repeats", "-2"]),
    ("layer_draft", layer_draft.main, "--first", ["--out", "/nonexistent", "--first", "-1"]),
    ("layer_draft", layer_draft.main, "--last", ["--out", "/nonexistent", "--last", "-1"]),
    ("layer_draft", layer_draft.main, "--first", ["--out", "/x", "--first", "0", "--last", "0"]),
    ("prompt_cache_publish", prompt_cache_publish.main, "--tokens", ["--tokens", "0"]),
    ("prompt_cache_publish", prompt_cache_publish.main, "--repeats", ["--repeats", "0"]),
    ("prompt_cache_publish", prompt_cache_publish.main, "--steps-after", ["--steps-after", "0"]),
    ("two_models", two_models.parse_args, "--concurrency", ["--concurrency", "0"]),
    ("two_models", two_models.parse_args, "--max-tokens", ["--max-tokens", "0"]),
    ("two_models", two_models.parse_args, "--max-tokens", ["--max-tokens", str(MAX_MAX_TOKENS)]),
    ("two_models", two_models.parse_args, "--repeats", ["--repeats", "0"]),
    ("nvrtc_check", nvrtc_check.main, "--arch", ["--arch", "90"]),
    ("train_draft", _train, "--train-prompts", ["--train-prompts", "0"]),
    ("train_draft", _train, "--heldout-prompts", ["--heldout-prompts", "0"]),
    ("train_draft", _train, "--temperatures", ["--temperatures", "0", "-0.5"]),
    ("train_draft", _train, "--max-tokens", ["--max-tokens", "0"]),
    ("train_draft", _train, "--gen-batch", ["--gen-batch", "0"]),
    ("train_draft", _train, "--gen-chunk", ["--gen-chunk", "0"]),
    ("train_draft", _train, "--gen-budget", ["--gen-budget", "0"]),
    ("train_draft", _train, "--seed", ["--seed", "-1"]),
    ("train_draft", _train, "--bench-prompts", ["--bench-prompts", "-1"]),
    ("train_draft", _train, "--steps", ["--steps", "0"]),
    ("train_draft", _train, "--time-budget", ["--time-budget", "0"]),
    ("train_draft", _train, "--batch-tokens", ["--batch-tokens", "0"]),
    ("train_draft", _train, "--lr", ["--lr", "0"]),
    ("train_draft", _train, "--warmup", ["--warmup", "-1"]),
    ("train_draft", _train, "--eval-every", ["--eval-every", "0"]),
    ("train_draft", _train, "--draft-vocab", ["--draft-vocab", "0"]),
    ("train_draft", _train, "--depth", ["--depth", "4"]),
    ("train_draft.evaluate", evaluate.main, "prompts", ["0"]),
    ("train_draft.evaluate", evaluate.main, "--max-tokens", ["--max-tokens", "0"]),
]


@pytest.mark.parametrize(
    ("option", "run", "argv"),
    [(option, run, argv) for _, run, option, argv in OTHER_CASES],
    ids=[f"{cli} {' '.join(argv)}" for cli, _, _, argv in OTHER_CASES],
)
def test_every_other_command_line_refuses_its_numbers_out_of_range(option, run, argv, capsys):
    refused(run, argv, option, capsys)


def test_a_layer_draft_of_every_layer_is_refused_before_any_weight_is_read(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 6}))
    argv = ["--target", str(tmp_path), "--out", str(tmp_path / "out"), "--first", "4"]
    err = refused(layer_draft.main, [*argv, "--last", "2"], "--first", capsys)
    assert "<= 5" in err and not (tmp_path / "out").exists()


def test_a_layer_draft_of_a_folder_that_is_not_a_model_is_refused(tmp_path, capsys):
    argv = ["--target", str(tmp_path), "--out", str(tmp_path / "out")]
    err = refused(layer_draft.main, argv, "--target", capsys)
    assert "not a model folder" in err and not (tmp_path / "out").exists()


def test_more_prompts_than_the_generator_makes_are_refused_before_the_model(monkeypatch, capsys):
    def too_many(*args, **kwargs):
        raise ValueError("asked for 9999999 prompts; the generator makes 262320 here")

    monkeypatch.setattr(train_draft, "make_prompts", too_many)
    err = refused(_train, ["--train-prompts", "9999999"], "--train-prompts", capsys)
    assert "262320" in err


def test_the_trainers_bounds_pass():
    args = train_draft.parse_args(["--out", "x", "--temperatures", "0", "--warmup", "0"])
    assert args.temperatures == [0.0] and args.warmup == 0
    assert train_draft.parse_args(["--out", "x", "--depth", "3", "--bench-prompts", "0"]).depth == 3
    assert train_draft.parse_args(["--out", "x", "--lr", "1e-5", "--seed", "0"]).lr == 1e-5
