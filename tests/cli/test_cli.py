"""The `salon` command in-process: init, check."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from salon.cli import main
from tests.conftest import WriteConfig


def test_init_writes_a_config_that_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "bots-here"
    assert main(["init", str(root), "--model", "llama3.2"]) == 0
    monkeypatch.setenv("OPENAI_API_KEY", "sk-init-test")
    assert main(["check", str(root)]) == 0
    out = capsys.readouterr().out
    assert "ok: bot assistant (Assistant) via openai, model llama3.2" in out
    # running init again keeps the user's edits
    (root / "shared.yaml").write_text((root / "shared.yaml").read_text() + "\n# mine\n")
    assert main(["init", str(root), "--provider", "openai"]) == 0
    assert "# mine" in (root / "shared.yaml").read_text()


def test_check_reports_missing_secret_and_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "c"
    main(["init", str(root), "--provider", "openai"])
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["check", str(root)]) == 2
    err = capsys.readouterr().err
    assert (
        "shared.yaml:11: providers.openai.api_key_env: environment variable OPENAI_API_KEY" in err
    )


def test_check_reports_a_blank_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "c"
    main(["init", str(root), "--provider", "openai"])
    monkeypatch.setenv("OPENAI_API_KEY", " ")
    assert main(["check", str(root)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {root}/shared.yaml:11: providers.openai.api_key_env: "
        "environment variable OPENAI_API_KEY is empty (required secret)"
    ]


@pytest.mark.parametrize(
    ("bot_yaml", "expected"),
    [
        ("provider: p\nname: [oops\n", "helper.yaml:2: (top level): invalid YAML"),
        ("provider: p\nmax_tokenz: 5\n", "helper.yaml:2: max_tokenz: unknown key"),
        (
            "provider: p\nmax_tokens: many\n",
            "helper.yaml:2: max_tokens: Input should be a valid integer",
        ),
        (
            "provider: p\ntimezone: Mars/Olympus\n",
            "helper.yaml:2: timezone: unknown timezone 'Mars/Olympus'",
        ),
        (
            "provider: p\nproviders:\n  p:\n    base_url: localhost:11434/v1\n",
            "helper.yaml:4: providers.p.base_url: not an http(s) URL with a host",
        ),
        (
            "provider: p\nproviders:\n  p:\n    timeout: .inf\n",
            "helper.yaml:4: providers.p.timeout: Input should be a finite number",
        ),
        ("provider: p\nmax_tokens: 5\nmax_tokens: 6\n", "helper.yaml:3: max_tokens: set twice"),
    ],
)
def test_check_errors_are_precise(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str], bot_yaml: str, expected: str
) -> None:
    root = write_config("providers:\n  p:\n    type: openai\n    model: m\n", helper=bot_yaml)
    assert main(["check", str(root)]) == 2
    assert expected in capsys.readouterr().err


def fake_venv_salon(tmp_path: Path) -> Path:
    script = tmp_path / ".venv" / "bin" / "salon"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    return script


def next_line(capsys: pytest.CaptureFixture[str]) -> str:
    return next(x for x in capsys.readouterr().out.splitlines() if x.startswith("next:"))


def test_init_names_salon_as_the_user_can_type_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = fake_venv_salon(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setattr(sys, "argv", [".venv/bin/salon", "init", "my bots"])
    assert main(["init", "my bots"]) == 0
    assert next_line(capsys) == (
        "next: .venv/bin/salon check 'my bots' && .venv/bin/salon chat 'my bots'"
    )
    # run by its absolute path from where it lies below: still the short path
    monkeypatch.setattr(sys, "argv", [str(script), "init", "my-bots"])
    assert main(["init", "my-bots"]) == 0
    assert next_line(capsys) == (
        "next: .venv/bin/salon check my-bots && .venv/bin/salon chat my-bots"
    )


def test_init_says_salon_when_it_is_on_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = fake_venv_salon(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{script.parent}:/usr/bin:/bin")
    monkeypatch.setattr(sys, "argv", [str(script), "init", "my-bots"])
    assert main(["init", "my-bots"]) == 0
    assert next_line(capsys) == "next: salon check my-bots && salon chat my-bots"


def test_init_run_as_a_module_names_the_script_beside_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setattr(sys, "argv", ["/somewhere/salon/__main__.py", "init", "b"])
    assert main(["init", "b"]) == 0
    beside = Path(sys.executable).parent / "salon"
    expected = str(beside) if beside.is_file() else f"{sys.executable} -m salon"
    assert next_line(capsys) == f"next: {expected} check b && {expected} chat b"


@pytest.mark.parametrize(
    ("variables", "arguments", "provider"),
    [
        ({}, [], "local"),
        ({"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}, [], "openai"),
        ({"OPENAI_MODEL": "llama3.2"}, [], "openai"),
        ({}, ["--model", "llama3.2"], "openai"),
        ({"ANTHROPIC_API_KEY": "sk-ant-test"}, [], "anthropic"),
        ({"ANTHROPIC_API_KEY": "sk-ant-test"}, ["--provider", "local"], "local"),
    ],
)
def test_init_uses_the_provider_the_environment_has_else_the_local_model(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    variables: dict[str, str],
    arguments: list[str],
    provider: str,
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    root = tmp_path / "c"
    assert main(["init", str(root), *arguments]) == 0
    bot = (root / "bots" / "assistant.yaml").read_text()
    assert f"\nprovider: {provider}  " in bot
    if "llama3.2" in str(variables) + str(arguments):
        assert "    model: llama3.2\n" in (root / "shared.yaml").read_text()
