"""Gateway names: an entry point's NAME:ARG and a module's MODULE:FACTORY never read as each other."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.harness import registry

MYGW = '''
from reference_impl import ReferenceGateway

def make():
    return ReferenceGateway()
'''


@pytest.fixture
def mygw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module `mygw` whose factory `make` is registered as the entry point `mygw`."""
    (tmp_path / "mygw.py").write_text(MYGW, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "registered", lambda: {**registry.BUILTIN, "mygw": "mygw:make"})


def test_the_entry_points_own_target_is_module_factory(mygw: None) -> None:
    """`--gateway mygw:make` used to call make("make") (a TypeError in every scenario)."""
    assert type(registry.resolve("mygw:make")()).__name__ == "ReferenceGateway"
    assert type(registry.resolve("mygw")()).__name__ == "ReferenceGateway"


def test_an_argument_to_a_factory_that_takes_none_is_refused_in_one_line(mygw: None) -> None:
    with pytest.raises(registry.UnknownGateway, match=r"gateway 'mygw:x': the entry point 'mygw' \(mygw:make\) takes no "
                                                      r"argument; use --gateway mygw, or MODULE:FACTORY for another factory"):
        registry.resolve("mygw:x")


@pytest.mark.parametrize(("name", "said"), [
    ("yourgw", "unknown gateway 'yourgw' (a gateway module of yours is named with its factory: --gateway yourgw:FACTORY)"),
    ("yourgw.make", "unknown gateway 'yourgw.make' (a gateway module of yours is named with its factory: "
                    "--gateway yourgw:make)"),
    ("yourgw.py:make", "name the module, not its file: --gateway yourgw:make"),
    ("refrence", "unknown gateway 'refrence' (did you mean 'reference'?)"),
])
def test_a_gateway_name_a_newcomer_misspells_gets_the_spelling_meant(
        name: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`mygw`, `mygw.make` and `mygw.py:make` each said only `unknown gateway` or `No module named`."""
    (tmp_path / "yourgw.py").write_text(MYGW, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(registry.UnknownGateway) as raised:
        registry.resolve(name)
    assert said in str(raised.value)
