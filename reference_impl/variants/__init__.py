"""The bug zoo: the reference gateway with one real-world bug put back per variant.

Each variant overrides one small step (a method) of `ReferenceGateway` (or of `BatchingProvider`, via
`make_provider`) and quotes its report. The checks must catch every one; catalog
scenarios name the variants they exist to catch in `catches:`.
"""

from __future__ import annotations

from reference_impl.gateway import ReferenceGateway
from reference_impl.variants.boundaries import (
    AnchorsAtAdmission,
    EmptySessionGetsNoEnd,
    EndAfterSwitch,
    EndCarriesTagsOnly,
    EndRepliesApart,
    ExpirySkipsEndWithoutAgent,
    IdleExpiryNoFinalize,
    ResetNamesEndedSession,
    ResumeKeepsClocks,
    ShutdownEndsSessions,
    SuccessorBeginsAtNew,
    SwitchNamesStalePrevious,
    SyncAfterEnd,
)
from reference_impl.variants.crashpoints import (
    BatchReshipAfterCrash,
    CrashForgetsCommands,
    ReplyBeforeMemory,
    RotateBeforeEndRecorded,
    StopDropsOutboxFirst,
)
from reference_impl.variants.delegates import (
    DelegateChildKeyedByChat,
    DelegateOpensSession,
    DelegateParentIsFirstSession,
    DelegateResultDropped,
    DelegateResultToNewestChat,
    EndCarriesDelegateTurns,
)
from reference_impl.variants.eviction import (
    EvictCommitThenExpiryDoubleEnd,
    IdleSweepEvictsBeforeDailyExpiry,
    IdleSweepNeverReapsNone,
    IdleSweepOnlyNone,
    LruEvictDropsUnflushed,
)
from reference_impl.variants.heal import (
    AnswerRefusedAfterRowDeleted,
    DeletedRowDropsTurns,
    EndKeepsAgent,
    EvictDropsDeletedTranscript,
    HealForgetsPendingReplay,
    HealMutedHidesHistory,
    HealOnAnyFkDuplicates,
    HealReplaysTailOnly,
    OrphanChildNeverRecreated,
    ParentResurrectedForChild,
)
from reference_impl.variants.liveness import (
    AnswersBeforeTheLlm,
    AnswersFirstTurnOnly,
    AnswersWithoutLlm,
    DropsReplies,
    EchoesMessage,
    NeverReplies,
    RepliesToNewestChat,
)
from reference_impl.variants.memory import (
    BatchFlushReshipsRetained,
    BatchLostOnShutdown,
    BatchNoFlushOnSessionEnd,
    BatchPairsWrong,
    FlushAfterFinalize,
    MemoryGetsTagsOnly,
    MemoryShipsReplyTwice,
    RetryDropsNewerTurns,
    RetryMergesCalls,
    SyncTurnSwapped,
)
from reference_impl.variants.policy import (
    CommandMovesIdleClock,
    CommandNoticesNothing,
    ContextKeptAcrossNew,
    DailyBoundaryInUtc,
    DefaultPolicyMisreported,
    EagerChatLeftLazy,
    GroupSharesOneSession,
    LazyChatStopsTheWatcher,
    MessageResetFiresNoHooks,
    NewEndsEndedSession,
    QueuedClockAtAdmission,
    QueuedJudgedAtAdmission,
    ResetCommandIgnored,
    ResetMidTurn,
    RestartKeepsOldPolicy,
    ResumeRefusedMidTurn,
    ServesNewestFirst,
    StopNoticesNothing,
    WatcherEndsBusySession,
)
from reference_impl.variants.trust import (
    AbandonedTurnKept,
    BusyFlagStuck,
    CrashKeepsMemory,
    DelegateAlwaysSkipped,
    DelegateSyncedToMemory,
    StopDropsQueued,
    StopIgnored,
    StopTakesFirstBusyChat,
    StoresTagsOnly,
)

VARIANTS: dict[str, type[ReferenceGateway]] = {
    "expiry-skips-end-without-agent": ExpirySkipsEndWithoutAgent,
    "idle-expiry-no-finalize": IdleExpiryNoFinalize,
    "lru-evict-drops-unflushed": LruEvictDropsUnflushed,
    "idle-sweep-evicts-before-daily-expiry": IdleSweepEvictsBeforeDailyExpiry,
    "idle-sweep-never-reaps-none": IdleSweepNeverReapsNone,
    "idle-sweep-only-none": IdleSweepOnlyNone,
    "evict-commit-then-expiry-double-end": EvictCommitThenExpiryDoubleEnd,
    "batch-no-flush-on-session-end": BatchNoFlushOnSessionEnd,
    "batch-lost-on-shutdown": BatchLostOnShutdown,
    "batch-flush-reships-retained": BatchFlushReshipsRetained,
    "retry-drops-newer-turns": RetryDropsNewerTurns,
    "end-after-switch": EndAfterSwitch,
    "deleted-row-drops-turns": DeletedRowDropsTurns,
    "heal-replays-tail-only": HealReplaysTailOnly,
    "heal-on-any-fk-duplicates": HealOnAnyFkDuplicates,
    "heal-muted-hides-history": HealMutedHidesHistory,
    "heal-forgets-pending-replay": HealForgetsPendingReplay,
    "answer-refused-after-row-deleted": AnswerRefusedAfterRowDeleted,
    "orphan-child-never-recreated": OrphanChildNeverRecreated,
    "evict-drops-deleted-transcript": EvictDropsDeletedTranscript,
    "parent-resurrected-for-child": ParentResurrectedForChild,
    "reset-mid-turn": ResetMidTurn,
    "watcher-ends-busy-session": WatcherEndsBusySession,
    "resume-refused-mid-turn": ResumeRefusedMidTurn,
    "command-moves-idle-clock": CommandMovesIdleClock,
    "daily-boundary-in-utc": DailyBoundaryInUtc,
    "message-reset-fires-no-hooks": MessageResetFiresNoHooks,
    "shutdown-ends-sessions": ShutdownEndsSessions,
    "sync-after-end": SyncAfterEnd,
    "never-replies": NeverReplies,
    "drops-replies": DropsReplies,
    "answers-first-turn-only": AnswersFirstTurnOnly,
    "stop-ignored": StopIgnored,
    "abandoned-turn-kept": AbandonedTurnKept,
    "busy-flag-stuck": BusyFlagStuck,
    "crash-keeps-memory": CrashKeepsMemory,
    "memory-ships-reply-twice": MemoryShipsReplyTwice,
    "delegate-always-skipped": DelegateAlwaysSkipped,
    "batch-reship-after-crash": BatchReshipAfterCrash,
    "rotate-before-end-recorded": RotateBeforeEndRecorded,
    "crash-forgets-commands": CrashForgetsCommands,
    "stop-drops-outbox-first": StopDropsOutboxFirst,
    "reply-before-memory": ReplyBeforeMemory,
    "new-ends-ended-session": NewEndsEndedSession,
    "restart-keeps-old-policy": RestartKeepsOldPolicy,
    "default-policy-misreported": DefaultPolicyMisreported,
    "stop-notices-nothing": StopNoticesNothing,
    "group-shares-one-session": GroupSharesOneSession,
    "lazy-chat-stops-the-watcher": LazyChatStopsTheWatcher,
    "eager-chat-left-lazy": EagerChatLeftLazy,
    "replies-to-newest-chat": RepliesToNewestChat,
    "echoes-message": EchoesMessage,
    "answers-before-the-llm": AnswersBeforeTheLlm,
    "stores-tags-only": StoresTagsOnly,
    "memory-gets-tags-only": MemoryGetsTagsOnly,
    "end-carries-tags-only": EndCarriesTagsOnly,
    "context-kept-across-new": ContextKeptAcrossNew,
    "serves-newest-first": ServesNewestFirst,
    "delegate-result-dropped": DelegateResultDropped,
    "flush-after-finalize": FlushAfterFinalize,
    "batch-pairs-wrong": BatchPairsWrong,
    "sync-turn-swapped": SyncTurnSwapped,
    "reset-names-ended-session": ResetNamesEndedSession,
    "switch-names-stale-previous": SwitchNamesStalePrevious,
    "anchors-at-admission": AnchorsAtAdmission,
    "reset-command-ignored": ResetCommandIgnored,
    "stop-drops-queued": StopDropsQueued,
    "resume-keeps-clocks": ResumeKeepsClocks,
    "successor-begins-at-new": SuccessorBeginsAtNew,
    "empty-session-gets-no-end": EmptySessionGetsNoEnd,
    "delegate-opens-session": DelegateOpensSession,
    "command-notices-nothing": CommandNoticesNothing,
    "delegate-parent-is-first-session": DelegateParentIsFirstSession,
    "end-replies-apart": EndRepliesApart,
    "delegate-synced-to-memory": DelegateSyncedToMemory,
    "answers-without-llm": AnswersWithoutLlm,
    "stop-takes-first-busy-chat": StopTakesFirstBusyChat,
    "queued-clock-at-admission": QueuedClockAtAdmission,
    "queued-judged-at-admission": QueuedJudgedAtAdmission,
    "delegate-child-keyed-by-chat": DelegateChildKeyedByChat,
    "delegate-result-to-newest-chat": DelegateResultToNewestChat,
    "end-carries-delegate-turns": EndCarriesDelegateTurns,
    "end-keeps-agent": EndKeepsAgent,
    "retry-merges-calls": RetryMergesCalls,
}


def make(name: str) -> ReferenceGateway:
    """A fresh instance of the variant `name`; KeyError lists the known names."""
    try:
        cls = VARIANTS[name]
    except KeyError:
        raise KeyError(f"unknown variant {name!r}; known: {', '.join(sorted(VARIANTS))}") from None
    return cls()


__all__ = ["VARIANTS", "make"]
