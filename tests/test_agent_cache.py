"""The reference's agent cache reports which agents came and went (`AgentCache.changes`)
exactly as the runner's diff of two `resources()` lists would (`ResourcesDeltas`, through
`conformance.observations.membership`), over random uses, loads and evictions of a cache of a
few to many agents: an agent used, moved or flipped busy is no change."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.observations import Resources, ResourcesDeltas
from reference_impl.cache import Agent, AgentCache

# One step of the gateway between two reports: use an agent (fetched, moved to the end, its
# flag set), load a new one, evict one, or load an evicted one again (perhaps evicted since the
# last report); `pick` chooses among the cached agents (a negative one among the last three,
# the most recently used) or the evicted ones.
STEP = st.tuples(st.sampled_from(("use", "load", "evict", "reload")), st.one_of(st.integers(-3, -1), st.integers(0, 10_000)),
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
    evicted: list[str] = []
    diff = ResourcesDeltas()
    diff.detail(Resources(_listed(cache)))
    for steps in reports:
        for what, pick, busy in steps:
            sessions = list(cache.agents)
            if what == "reload" and evicted:
                cache.put(Agent(evicted.pop(pick % len(evicted)), "chat", "key", busy=busy))
            elif what in ("load", "reload") or not sessions:
                cache.put(Agent(f"s{loaded}", "chat", "key", busy=busy))
                loaded += 1
            elif what == "use":
                agent = cache.get(sessions[pick % len(sessions) if pick >= 0 else max(pick, -len(sessions))])
                assert agent is not None
                agent.busy = busy
            else:
                gone = sessions[pick % len(sessions) if pick >= 0 else max(pick, -len(sessions))]
                cache.pop(gone)
                evicted.append(gone)
        after = _listed(cache)
        assert cache.changes() == (diff.detail(Resources(after)) or {}), after
