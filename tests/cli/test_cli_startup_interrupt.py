"""Ctrl-C while the command is still starting (importing click, rich and its verbs) ends it
as anywhere else: exit 130 and ``jetstore: interrupted``, not a KeyboardInterrupt traceback."""

from __future__ import annotations

import pytest

import jetstore
import jetstore._app


def test_ctrl_c_during_start_up_exits_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(jetstore._app, "main", interrupted)  # where the imports end
    with pytest.raises(SystemExit) as ended:
        jetstore.main()
    assert ended.value.code == 130
    assert capsys.readouterr().err == "jetstore: interrupted\n"
