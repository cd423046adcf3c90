"""`salon init --platform matrix` and `salon check` on its config."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from salon.cli import main


def test_init_for_matrix_writes_a_section_check_names_its_missing_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "c"
    assert main(["init", str(root), "--provider", "openai", "--platform", "matrix"]) == 0
    bot = yaml.safe_load((root / "bots" / "assistant.yaml").read_text())
    assert bot["platforms"]["matrix"]["user_id"] == "@assistant:example.org"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("MATRIX_ACCESS_TOKEN", raising=False)
    assert main(["check", str(root)]) == 2
    err = capsys.readouterr().err
    assert "platforms.matrix.access_token_env: environment variable MATRIX_ACCESS_TOKEN" in err
    monkeypatch.setenv("MATRIX_ACCESS_TOKEN", "syt_token")
    assert main(["check", str(root)]) == 0


def test_check_asks_for_the_password_of_a_password_login(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "c"
    main(["init", str(root), "--provider", "openai", "--platform", "matrix"])
    path = root / "bots" / "assistant.yaml"
    path.write_text(path.read_text().replace("# password_env:", "password_env:"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("MATRIX_ACCESS_TOKEN", raising=False)
    monkeypatch.delenv("MATRIX_PASSWORD", raising=False)
    assert main(["check", str(root)]) == 2
    err = capsys.readouterr().err
    assert "platforms.matrix.password_env: environment variable MATRIX_PASSWORD" in err
    assert "MATRIX_ACCESS_TOKEN" not in err  # the password login needs no token
