"""python -m bwdconv (the doctor) reports the build, the device, the state and
the decisions cache truthfully, with stable keys."""

import importlib.metadata
import json
import os
import pathlib
import subprocess
import sys

import torch

import bwdconv
from bwdconv import _cache, _keys, _variables, doctor
from bwdconv._library import _C

KEYS = {
    "versions": {"bwdconv", "torch", "torch_required", "torch_cuda", "torch_hip", "python"},
    "build": {"gpu_kernels", "toolchain", "architectures", "debug", "compile_args",
              "built_against_torch", "record", "torch_arch_list"},
    "device": {"cpu", "threads", "gpus"},
    "scopes": {"functional", "aten"},
    "forced_strategy": None,
    "autotune": {"enabled", "budget_seconds", "key_seconds"},
    "cache": {"path", "exists", "error", "entries", "this_device", "this_device_and_versions"},
    "kernels_on_host": None,
    "environment": None,
    "bad_settings": None,
}


def test_the_report_has_its_stable_keys():
    facts = doctor.report()
    assert set(facts) == set(KEYS)
    for name, keys in KEYS.items():
        if keys is not None:
            assert set(facts[name]) == keys, name


def test_versions_are_the_running_ones():
    v = doctor.report()["versions"]
    assert (v["bwdconv"], v["torch"], v["torch_cuda"]) == \
        (bwdconv.__version__, torch.__version__, torch.version.cuda)
    assert v["torch_required"] == f"torch>={bwdconv._version.TORCH_MINIMUM}"  # as setup.py


def test_the_build_record_agrees_with_the_extension():
    record = doctor.read_build_record()
    assert record is not None, f"the build writes {doctor.BUILD_RECORD}"
    b = doctor.report()["build"]
    assert b["gpu_kernels"] == bool(_C.gpu_kernels)
    assert (record["toolchain"] != "cpu") == b["gpu_kernels"]
    assert b["built_against_torch"] == torch.__version__
    if b["gpu_kernels"]:
        assert b["architectures"], "a build with GPU kernels names their architectures"
    else:
        assert b["architectures"] == []


def test_the_kernels_state_is_read_from_the_extension_not_the_record(tmp_path):
    record = tmp_path / "_build.json"
    record.write_text(json.dumps({"toolchain": "cuda", "architectures": ["9.0"], "torch": "x"}))
    b = doctor.build(doctor.read_build_record(str(record)))
    assert b["gpu_kernels"] == bool(_C.gpu_kernels)
    assert b["architectures"] == (["9.0"] if _C.gpu_kernels else [])
    unknown = doctor.build(doctor.read_build_record(str(tmp_path / "missing.json")))
    assert unknown["record"] is None and unknown["toolchain"] is None


def _key(device, torch_version=torch.__version__):
    return f"{device} | torch {torch_version} | bwdconv {bwdconv.__version__} | float32 | rest"


def test_the_cache_counts_the_entries_for_this_device(tmp_path, monkeypatch):
    monkeypatch.setenv("BWDCONV_CACHE_DIR", str(tmp_path))
    here = _keys.device_description("cpu", -1)
    entry = {"gradients": {"input": {"choice": "aten"}}}
    _cache._write_atomically(_cache.path(), {
        _key(here): entry, _key(here, "0.0.0"): entry, _key("cpu Other CPU 3 threads"): entry})
    c = doctor.report()["cache"]
    assert c["path"] == str(tmp_path / _cache.FILE_NAME) and c["exists"] and not c["error"]
    assert (c["entries"], c["this_device"], c["this_device_and_versions"]) == (3, 2, 1)


def test_an_unreadable_cache_is_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("BWDCONV_CACHE_DIR", str(tmp_path))
    (tmp_path / _cache.FILE_NAME).write_text("{not json")
    c = doctor.report()["cache"]
    assert c["error"] and "JSON" in c["error"] and c["entries"] == 0


def test_the_state_of_this_process_is_reported():
    before = doctor.report()
    assert before["scopes"] == {"functional": False, "aten": False}
    with bwdconv.enabled(), bwdconv.autotuning(), bwdconv.kernels_on_host(), \
            bwdconv.force_strategy("phase"):
        during = doctor.report()
    assert during["scopes"]["functional"] and during["autotune"]["enabled"]
    assert during["kernels_on_host"] and during["forced_strategy"] == "phase"
    assert not before["autotune"]["enabled"] and not before["kernels_on_host"]


def test_variables_in_effect_have_their_meaning(monkeypatch):
    monkeypatch.setenv("BWDCONV_AUTOTUNE_BUDGET", "5")
    monkeypatch.setenv("BWDCONV_NO_SUCH_THING", "1")
    rows = {r["name"]: r for r in doctor.report()["environment"]}
    assert rows["BWDCONV_AUTOTUNE_BUDGET"]["value"] == "5"
    assert rows["BWDCONV_AUTOTUNE_BUDGET"]["meaning"] == \
        _variables.MEANINGS["BWDCONV_AUTOTUNE_BUDGET"][1]
    assert rows["BWDCONV_NO_SUCH_THING"]["meaning"] is None
    assert all(name.startswith("BWDCONV_") for name in rows)
    lines = "\n".join(doctor.text(doctor.report()))
    assert "BWDCONV_NO_SUCH_THING=1: not a variable bwdconv reads" in lines


def _run(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BWDCONV_")}
    env["BWDCONV_CACHE_DIR"] = os.environ["BWDCONV_CACHE_DIR"]
    return subprocess.run([sys.executable, "-m", "bwdconv", *args], capture_output=True,
                          text=True, check=True, env=env).stdout


def test_python_m_bwdconv_json_is_the_report():
    facts = json.loads(_run("--json"))
    assert set(facts) == set(KEYS)
    assert facts["build"]["gpu_kernels"] == bool(_C.gpu_kernels)
    assert facts["versions"]["torch"] == torch.__version__
    assert facts["environment"] == [{"name": "BWDCONV_CACHE_DIR", "value":
                                     os.environ["BWDCONV_CACHE_DIR"], "read": "runtime",
                                     "meaning": _variables.MEANINGS["BWDCONV_CACHE_DIR"][1]}]


def test_python_m_bwdconv_says_whether_the_gpu_kernels_are_compiled_in():
    out = _run()
    state = "compiled in (" if _C.gpu_kernels else "not compiled in"
    assert f"GPU kernels: {state}" in out
    assert f"torch {torch.__version__}" in out and "decisions cache:" in out


def test_every_cli_has_a_console_entry_point():
    scripts = {e.name: e for e in importlib.metadata.entry_points(group="console_scripts")
               if e.name.startswith("bwdconv-")}
    assert {"bwdconv-bench", "bwdconv-tune", "bwdconv-doctor"} <= set(scripts)
    assert scripts["bwdconv-doctor"].load() is doctor.main
    assert all(callable(e.load()) for e in scripts.values())
    readme = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()
    for name in scripts:  # each documented for users
        assert f"`{name}`" in readme, name


def test_each_cli_help_says_what_it_does_in_whole_sentences():
    from bwdconv import demo, tune
    from bwdconv.bench import cli

    for make in (doctor.parser, tune.parser, cli.parser):
        assert make().description.rstrip().endswith("."), make
    assert demo.__doc__.split("\n\n")[0].split()[-1].endswith(".")
    help_text = subprocess.run([sys.executable, "-m", "bwdconv.demo", "--help"],
                               capture_output=True, text=True, check=True).stdout
    assert "checking the gradients against the same steps with bwdconv disabled." in \
        " ".join(help_text.split())
