"""How make test spreads the suite over its workers (tests/conftest.py): scopes and their order."""

from __future__ import annotations

from tests.conftest import APART, REPO, SCOPE_SECONDS, scope_of, scope_seconds


def test_a_module_is_a_scope_and_a_test_apart_is_its_own() -> None:
    assert scope_of("tests/test_query.py::test_x[1]") == scope_of("tests/test_query.py::test_y") == "tests/test_query.py"
    kill = "tests/test_stream_kills.py::test_random_kills_lose_and_double_nothing[302]"
    assert scope_of(kill) == kill != scope_of(kill.replace("302", "303"))
    assert scope_seconds(kill) > scope_seconds("tests/test_rle.py::test_x") == 0


def test_every_scope_named_is_a_module_or_test_that_exists() -> None:
    for name in [*SCOPE_SECONDS, *(a.removeprefix("tests/") for a in APART)]:
        module, _, test = name.partition("::")
        source = REPO / "tests" / module
        assert source.is_file(), name
        if test:
            assert f"def {test.split('[', 1)[0]}(" in source.read_text(), name
