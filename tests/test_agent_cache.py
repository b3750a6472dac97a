"""The reference's agent cache reports what moved (`AgentCache.changes`) exactly as the runner's
diff of two `resources()` lists would (`conformance.observations._delta`): its fast paths
included, over random uses, loads and evictions of a cache of a few to many agents."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.observations import Resources, _delta
from reference_impl.cache import Agent, AgentCache

# One step of the gateway between two reports: use an agent (fetched, moved to the end, its
# flag set), load a new one, or evict one; `pick` chooses among the cached agents (a negative
# one among the last three, the most recently used: where the reports' fast paths read).
STEP = st.tuples(st.sampled_from(("use", "load", "evict")), st.one_of(st.integers(-3, -1), st.integers(0, 10_000)),
                 st.booleans())


def _listed(cache: AgentCache) -> tuple[tuple[str, bool], ...]:
    return tuple((agent.session, agent.busy) for agent in cache.agents.values())


@settings(max_examples=400, deadline=None)
@given(start=st.integers(0, 60), reports=st.lists(st.lists(STEP, max_size=6), min_size=1, max_size=25))
def test_changes_are_the_diff_of_two_listings(start: int, reports: list[list[tuple[str, int, bool]]]) -> None:
    cache = AgentCache(cap=50, idle_ttl=0)
    loaded = 0
    for _ in range(start):
        cache.put(Agent(f"s{loaded}", "chat", "key"))
        loaded += 1
    cache.rebase()
    before = _listed(cache)
    for steps in reports:
        for what, pick, busy in steps:
            sessions = list(cache.agents)
            if what == "load" or not sessions:
                cache.put(Agent(f"s{loaded}", "chat", "key", busy=busy))
                loaded += 1
            elif what == "use":
                agent = cache.get(sessions[pick % len(sessions) if pick >= 0 else max(pick, -len(sessions))])
                assert agent is not None
                agent.busy = busy
            else:
                cache.pop(sessions[pick % len(sessions) if pick >= 0 else max(pick, -len(sessions))])
        after = _listed(cache)
        answer = cache.changes()
        if answer is None:  # too many changes to say cheaply: the gateway reports the whole state
            cache.rebase()
        elif after == before:
            assert answer == {}
        else:
            assert answer == _delta(Resources(before), Resources(after)), (before, after)
        before = after
