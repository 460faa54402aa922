"""Ctrl-C that Python re-raises wrapped (a KeyboardInterrupt inside a dataclass's
``__set_name__`` during an import becomes a RuntimeError) is still an interrupt: one line,
exit status 130; any other RuntimeError is not taken for one."""

from __future__ import annotations

import dataclasses

import pytest

from nslm.errors import caused_by_interrupt


class _Interrupting:
    def __set_name__(self, owner, name):
        raise KeyboardInterrupt


def test_an_interrupt_in_a_class_body_is_recognised() -> None:
    with pytest.raises(BaseException) as info:

        @dataclasses.dataclass
        class Wrapped:
            field: object = _Interrupting()

    assert caused_by_interrupt(info.value)
    assert not caused_by_interrupt(RuntimeError("a real bug"))


def test_the_cli_turns_a_wrapped_interrupt_into_exit_130(monkeypatch, capsys) -> None:
    import nslm.cli as cli_module

    def interrupted(*args, **kwargs):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise RuntimeError("Error calling __set_name__") from exc

    monkeypatch.setattr(cli_module.cli, "main", interrupted)
    assert cli_module.main(["train"]) == 130
    assert capsys.readouterr().err.strip() == "error: interrupted"
