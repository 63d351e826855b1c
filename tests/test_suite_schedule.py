"""How make test spreads the suite over its workers (tests/conftest.py): scopes and their order."""

from __future__ import annotations

from tests.conftest import APART, REPO, SCOPE_SECONDS, TOGETHER, scope_of, scope_seconds


def test_a_module_is_a_scope_and_a_test_apart_is_its_own() -> None:
    assert scope_of("tests/test_query.py::test_x[1]") == scope_of("tests/test_query.py::test_y") == "tests/test_query.py"
    kill = "tests/test_stream_kills.py::test_random_kills_lose_and_double_nothing[302]"
    assert scope_of(kill) == kill != scope_of(kill.replace("302", "303"))
    assert scope_seconds(kill) > scope_seconds("tests/test_rle.py::test_x") == 0


def test_the_tests_of_a_group_share_one_scope_apart_from_their_module() -> None:
    for group, members in TOGETHER.items():
        assert {scope_of(m + "[x]") for m in members} == {group}
        assert group.split("::")[0] == members[0].split("::")[0] != scope_of(members[0])
        assert scope_seconds(members[0]) == SCOPE_SECONDS[group.removeprefix("tests/")] > 0


def test_every_scope_named_is_a_module_or_test_that_exists() -> None:
    groups = {g.removeprefix("tests/") for g in TOGETHER}
    members = [m.removeprefix("tests/") for ms in TOGETHER.values() for m in ms]
    for name in [*(n for n in SCOPE_SECONDS if n not in groups), *(a.removeprefix("tests/") for a in APART), *members]:
        module, _, test = name.partition("::")
        source = REPO / "tests" / module
        assert source.is_file(), name
        if test:
            assert f"def {test.split('[', 1)[0]}(" in source.read_text(), name
