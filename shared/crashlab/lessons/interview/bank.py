"""The interview bank's questions, one to a few per lesson: what a weak answer sounds like, what a strong one says,
the follow-up to expect, and the choices of the self-check (see :mod:`crashlab.lessons.interview`)."""

from __future__ import annotations

from crashlab.lessons.interview.question import GRADED, Question
from crashlab.lessons.interview.question import question as _q
from crashlab.lessons.interview.streaming import STREAMING


BANK: tuple[Question, ...] = (
    _q("q01", "1", "What does durable execution buy an agent that an ordinary retry does not?",
       "It retries the agent when it fails.",
       "After a crash the run resumes the conversation where it was: finished steps are not redone and recorded "
       "model answers are not paid for again, because progress lives outside the process.",
       "Where exactly does the state live, and what happens to a step that was running when the process died?",
       ["Retrying the whole run from the start when a step fails",
        "Resuming at the last recorded step with its results",
        "Saving the chat history so the model can say where it left off"], "B"),
    _q("q02", "1", "Your agent logs each step after its tool returns. Where can a crash still cause a duplicate?",
       "Nowhere, the log records every step.",
       "Between the tool's effect committing and the log line being written: the resume has no record of the step, "
       "asks again, and repeats the effect. Logging earlier moves the window, it cannot close it.",
       "How would you close that window? (Idempotency at the tool or the service.)",
       ["A crash between the tool's effect and the log line that records it", "Nowhere, as long as the log is fsynced after every line",
        "When two workers run the same order at once"], GRADED),
    _q("q03", "1", "Why log the model's decision before running the tool?",
       "So the log is more complete.",
       "So a crash between the decision and the effect does not cost the model call again: the resume finds the "
       "decided tool call in the log and runs it without asking. The only repeat left is an answer that died in flight.",
       "Which crash point still repeats a model call, and why can no engine avoid it?",
       ["So the tool call runs exactly once, even after a crash",
        "So the resume runs the logged decision instead of asking the model again",
        "So the prompt shows what was decided earlier on"], GRADED),
    _q("q04", "1", "The last line of your JSONL log is half a record after a crash. What should the reader do?",
       "Skip lines that fail to parse.",
       "Drop only the unterminated tail: a record exists once its newline is durable. Damage to a complete line "
       "earlier in the file cannot come from a torn append, so it is an error that names the file and line.",
       "Why is silently skipping every unreadable line dangerous?",
       ["Drop the torn last line, fail loudly on damage elsewhere", "Truncate the file at the first line that does not parse, then go on",
        "Skip the lines that do not parse"], GRADED),
    _q("q05", "2", "How do you make sure an agent never charges a card twice across a crash?",
       "Check whether we already charged before charging.",
       "Send every charge with an idempotency key derived from the durable identity of the work (order or workflow "
       "id plus step), retry with the same key, and prove it by killing the process at every step and counting "
       "charges in the provider's ledger.",
       "What if the provider has no idempotency keys?",
       ["Look the order up in our database and charge only if no charge is recorded", "A fresh uuid4() key per request, recorded in our database",
        "A key from the order and the step, sent on every retry"], "C"),
    _q("q06", "2", "Why does a uuid4() idempotency key made at call time not protect you?",
       "It does, every request is unique.",
       "Because the resume or retry computes a new uuid, so the service sees a different key and treats the request "
       "as new. Uniqueness per attempt is exactly the wrong property: the key must be the same for every attempt "
       "of the same step (a uuid made once and saved durably before the first attempt would do).",
       "Where would you compute and store the key so that it survives a crash?",
       ["uuid4 values can collide when many workers mint them at once",
        "Each attempt gets a new key, so a retry is a new request",
        "The provider keeps a key for a few seconds, so a late retry finds it gone"], GRADED),
    _q("q07", "2", "A charge request timed out. Did the charge happen?",
       "No, it failed.",
       "Unknown: the service may have committed and lost the reply. Retry the same request with the same "
       "idempotency key, never a new one: if the first attempt committed, the provider returns its result. A 5xx "
       "is not the same as no reply at Stripe: API v1 saves the first response of a key, errors included, so the "
       "same key gets the same 500 back. After a 5xx treat the outcome as unknown "
       "and reconcile: look the charge up by the order, and honour the Stripe-Should-Retry header instead of looping. "
       "(API v2 keeps keys 30 days and finishes the failed work on a retry. The course's world answers a 503 having "
       "done nothing, so a retry there is fresh: a fair contract, but not Stripe's v1.)",
       "Which errors are retryable and which are not? (No reply, 409 and 5xx versus a 400.)",
       ["Unknown; send it again under the same key, and after a 5xx look the charge up",
        "No: a timeout means it was rolled back, so retry with a new key",
        "Unknown; retry with a new key, so a saved error is not sent back"], GRADED),
    _q("q08", "2", "Why should a provider reject the same key with different parameters?",
       "It should just replay the first response.",
       "A key reused for a different request is a bug; replaying would silently return the wrong charge, charging "
       "again would defeat the key. An error makes the bug loud.",
       "What parameters would you include in the request fingerprint?",
       ["It should not: replaying the first response is safe",
        "Replaying a different request's result would hide a bug",
        "A key is good for one request; replaying it for another is a bug"], GRADED),
    _q("q09", "2", "Two workers resume the same order at once. What goes wrong with a read-check-write JSON ledger?",
       "Nothing, they both check the ledger first.",
       "Both read before either writes, both see no record, both act. The check and the write must be one atomic "
       "step: a UNIQUE key with INSERT ... ON CONFLICT DO NOTHING and a row-count check, or a lock per order.",
       "And what does the ledger do if its owner dies between the effect and recording it?",
       ["Both may act: check and write are separate steps", "Each write is fsynced, so both see the other's record",
        "Nothing, as long as the file is rewritten atomically with a rename"], GRADED),
    _q("q10", "3", "Is a LangGraph checkpointer the same as durable execution?",
       "Yes, it saves the state after each step.",
       "Checkpoints are written at node boundaries; a crash inside a node re-runs the node on resume. Wrap each side "
       "effect in a @task: its result is saved and read back on resume instead of re-running it. Tasks still leave a "
       "window: the effect lands, and the task's result is saved in the background while the next task already runs "
       "(under async and sync alike; under exit nothing is saved until the run ends, so a crash repeats every task), "
       "so a crash then repeats the effect -- the effects keep idempotency keys.",
       "What do the durability modes exit, async and sync change, and which one never loses a finished node?",
       ["Yes: with a checkpointer every line of a node is journaled as it runs",
        "Yes, if the checkpointer is Postgres and durability is sync",
        "No: a crash re-runs the node, and tasks and keys cover its effects"], "C"),
    _q("q11", "3", "You used InMemorySaver and the process restarted. What survives?",
       "The checkpoints.",
       "Nothing: in-memory checkpoints live in the process. Durability needs a persistent backend (SQLite, Postgres).",
       "How do you resume a thread from another process?",
       ["Everything up to the last finished node", "Nothing", "The pending writes, but not the checkpoints"], GRADED),
    _q("q12", "4", "A DBOS step charges a card. Is the charge exactly once?",
       "Yes, DBOS guarantees exactly once.",
       "The step's result is recorded once it returns, so a completed step is not re-run; a step interrupted mid-way "
       "runs again (at least once). Exactly once is possible only when the effect and its record commit in one "
       "database transaction: in DBOS 3.x (which dropped the application database and @DBOS.transaction) that is a "
       "datasource transaction on your own database -- SQLAlchemyDatasource.create(url) gives a "
       "SqliteSyncDatasource or a PostgresSyncDatasource, and a function decorated with its transaction() records "
       "the step in the same transaction as your writes. A card charge at a provider is outside any transaction of "
       "yours, so it needs an idempotency key from the order (or workflow id) and the step.",
       "What happens to in-flight workflows when you deploy changed workflow code?",
       ["At least once: an interrupted step always runs again, so the charge needs a key",
        "Exactly once; the step's checkpoint and the charge commit together",
        "Exactly once, if the step runs in a datasource transaction"], "A"),
    _q("q13", "5", "Why can't a Temporal workflow call the model, the clock or random directly?",
       "Because it is slow.",
       "Workflow code is replayed from the event history on recovery and must take the same path every time; "
       "non-deterministic calls belong in activities, whose results are recorded. Use workflow.now() and "
       "workflow.random() for time and randomness inside the workflow. In Python the sandbox also refuses many of "
       "these calls while the workflow runs (datetime.now, the random module, sockets), so the mistake fails at once "
       "instead of at the first replay; what it lets through must still be deterministic.",
       "How do you ship a code change without breaking running workflows? (workflow.patched, replay tests.)",
       ["Replay must follow the same path, so nondeterminism goes into activities",
        "Only the model call must move: it is slow, while the clock and random are cheap",
        "It can, if the result is kept in a workflow variable"], "A"),
    _q("q14", "5", "After a worker is killed, why might a Temporal order take 10+ seconds to finish on a new worker?",
       "Temporal is slow.",
       "The interrupted activity is retried only after its start-to-close (or heartbeat) timeout, and the next "
       "workflow task waits on the dead worker's sticky queue until sticky_queue_schedule_to_start_timeout. Shorter "
       "activity timeouts (with heartbeats for long ones) and a shorter sticky timeout cut recovery to a few seconds. "
       "Turning the cache off (max_cached_workflows=0) also avoids the wait, but replays the whole history at every "
       "workflow task: the cost grows with the square of the turns.",
       "What do you trade away with short timeouts?",
       ["Turn off the workflow cache: it is the cause of the wait",
        "The activity's timeout and the sticky queue's timeout decide when work moves",
        "The new worker has to replay the history first, which takes seconds"], GRADED),
    _q("q15", "5", "How does an agent wait days for a human's approval without holding a process?",
       "A loop with sleep.",
       "A durable wait the engine records: a Temporal signal with workflow.wait_condition(timeout=...) (the timer is "
       "held by the server, any worker picks the run up), DBOS recv(timeout_seconds=...) (durable, but woken by a "
       "running DBOS process of the app: recovery on launch), or a LangGraph interrupt() resumed with "
       "Command(resume=...) -- which has no timeout and needs your own process or scheduler to resume the thread.",
       "What happens when the timeout fires, and who runs the code after it on each engine?",
       ["A worker thread sleeps until the approval arrives", "Poll the approvals table every minute from the agent",
        "A durable wait on a message with a timeout, recorded by the engine"], GRADED),
    _q("q16", "11", "Our booking agent sometimes reserves the same hotel twice. How do you debug it?",
       "Add more logging to the agent.",
       "Start from the provider's records for the order: two reservations with no key or different keys mean a "
       "missing or per-attempt key; two with the same key mean the retry came after the provider forgot the key; "
       "overlapping workers mean no single-writer lock; a duplicate right after a restart is the after-effect "
       "crash window. Reproduce it under the crash harness at that point, fix the key's "
       "origin, and keep the crash matrix in CI.",
       "What evidence would convince you it is fixed?",
       ["Read the agent's own log to see what it did twice",
        "Add a check-before-reserve in the agent and watch whether it recurs",
        "Compare the provider's reservations, keys and process timeline"], "C"),
    _q("q17", "11", "Each durable step pays for a write to the journal (an fsync, a database commit or a round trip to "
       "a server), and what that costs varies with the engine, the disk and the machine's load. Does it matter "
       "for an agent?",
       "Yes, it makes agents slow.",
       "Measure it on your machine against an fsync floor, then compare it with a model call: even the dearest "
       "engine's step is a small part of a call that takes seconds, and what the step buys is that a replay "
       "never re-burns tokens or repeats an effect, so every model call and effect is a step.",
       "When would you still pick the lightest engine?",
       ["It dominates the run, so batch several effects into one step",
        "Noise next to model calls of seconds: journal every call",
        "It adds up, so leave the model calls out of the journal to save it"], GRADED),
    _q("q18", "7", "The card is charged, then SKU-772 turns out to be out of stock for good. What should the agent do?",
       "Keep retrying the reservation.",
       "Compensate: the code, not the model, runs the undo steps for what succeeded -- refund the charge, tell the "
       "customer -- in reverse order, each recorded and keyed like any step, so a crash during the undo neither "
       "loses it nor refunds twice. Only permanent errors (a 4xx 'out of stock') start it; transient ones are retried. "
       "Two more paths need the same undo. A cancellation of the order runs the compensations too, in a scope that "
       "cannot itself be cancelled (or the undo is cut short). And an unknown outcome -- a charge whose retries ran "
       "out on a timeout, with no reply -- may have taken the money: register the refund before the call, and make "
       "it tolerate 'nothing to refund', so the undo is right whether the charge landed or not.",
       "What does the audit of a cleanly undone order look like, and what is an inconsistent one?",
       ["Retry the reservation with backoff until it succeeds; stock usually comes back",
        "Tell the model it failed and let it decide what to undo",
        "Run keyed, recorded undo steps in reverse order"], "C"),
    _q("q19", "7", "An order waits three days for approval; then the charge step is retried with the same key. Safe?",
       "Yes, the key makes it safe.",
       "Not necessarily: payment providers forget idempotency keys after a while (Stripe: at least 24 hours on API "
       "v1, 30 days on v2), and then the old key is a new charge. "
       "Record the charge's outcome durably the moment it is known, look the charge up at the provider (by the order) "
       "before charging again after a long pause, or take the payment after the wait, not before.",
       "Which of your keys outlive the provider's key lifetime, and how would the harness show it?",
       ["Yes: the same key returns the first charge, however late the retry",
        "No: make a fresh key after a day so the provider accepts it",
        "Not past the key's lifetime: look the order up at the provider"], GRADED),
    _q("q20", "5", "A partitioned worker's activity timed out and was retried elsewhere, but the first attempt is "
                   "still running. What protects the customer?",
       "Temporal kills the old attempt.",
       "Nothing stops a zombie attempt from finishing its effect: the server only stops listening to it. The key must "
       "be the same for every attempt (workflow id and activity id, never the attempt number), so whichever lands "
       "second is deduplicated; heartbeats let a live zombie learn it was cancelled.",
       "Why is the attempt number the wrong thing to put in the key?",
       ["The server kills the old attempt before retrying",
        "The same key on every attempt, so the second is deduplicated",
        "A key that includes the attempt number, so each attempt is traceable"], GRADED),
    _q("q21", "5", "A Temporal agent runs thousands of turns in one workflow. What breaks, and what do you do?",
       "Nothing, the history is unlimited.",
       "The event history has limits (warnings at 10k events, termination around 50k events or 50 MB) and every "
       "replay re-reads it. Continue-as-new with the conversation state (or a summary) starts a fresh history; check "
       "workflow.info().is_continue_as_new_suggested() at each turn, which the server sets as the history nears "
       "its limits, rather than counting events yourself. Keys built from the run id change across continue-as-new: "
       "build them from the workflow id and the turn when the new run must deduplicate against the old one.",
       "Which state do you carry over, and what happens to a signal sent during the switch?",
       ["The history grows, but a replay reads just the newest events",
        "Give the worker a bigger cache",
        "Continue-as-new when suggested, keys built to survive it"], GRADED),
    _q("q22", "4", "You reorder two steps of the workflow while 200 orders are mid-flight. What happens?",
       "They pick up the new code.",
       "A recovering run replays its recorded steps against the code: a changed order no longer matches. Temporal "
       "fails the workflow task with a nondeterminism error (use workflow.patched or worker versioning, and test with "
       "the replayer); DBOS recovers a workflow only on the application version that started it (a hash of the "
       "workflow code), so drain the old version or use DBOS.patch; LangGraph resumes by node name, so a removed or "
       "renamed node strands the thread.",
       "How would you test the change against real histories before the deploy?",
       ["In-flight runs pick up the new code safely at their next step",
        "They replay against the new code and break unless it is versioned",
        "They finish as before if the function and step names stay"], GRADED),
    _q("q23", "3", "The model answers with two tool_use blocks in one reply. What must a durable agent do?",
       "Run the first one.",
       "Answer every block: each runs as its own recorded step with its own key, and the next message carries a "
       "tool_result for each. The tool_use id is fresh on every model call, so it is a safe part of the key only "
       "when the reply that holds it is durable before the effect; if the reply can be lost, the resume asks again "
       "and gets new ids -- and may get the blocks in another order, so a block's index is no safer than its id. "
       "Then key by the order, the turn and the tool, with the call's place among that tool's calls when one tool "
       "is asked for twice. A key from the turn alone gives two calls of one tool one key: the second gets the "
       "first one's result. Or ask for one call per turn (disable_parallel_tool_use).",
       "What if one of the two calls fails permanently and the other succeeded?",
       ["Run the first block now; the model asks for the second next turn",
        "Run both under one key for the turn, with one combined result",
        "Run each as its own recorded, keyed step, with a tool_result for each"], GRADED),
    _q("q24", "2", "After a crash in the after:model window the model is asked again and now wants to charge "
                   "$59.99, not $49.99, under the same order-and-step key. What happens?",
       "The key deduplicates it, so nothing.",
       "The provider sees one key with different parameters and must refuse with a 400 (Stripe's idempotency_error; "
       "the world and lesson 2 answer the same), not replay the first charge and not charge again. It is not a 409: "
       "a 409 says the first request with the key is still in flight, which is retryable, so a client that reads "
       "this refusal as a 409 retries a bad request for ever. That loud error is the point: record the model's "
       "answer before acting so it is rarely asked again, and validate tool arguments against the order.",
       "Why is a model that answers differently the second time normal, and where else does it bite?",
       ["A 409 conflict; retry later with the same key",
        "A 400 refusal: same key, other parameters; do not retry it",
        "The provider quietly replays the first charge"], GRADED),
    _q("q25", "1", "Your log calls fsync after every line. Does killing the process with SIGKILL test that?",
       "Yes, a kill is a crash.",
       "No: a killed process's writes already sit in the kernel's page cache and survive it. fsync matters only when "
       "the machine or the OS goes down (a power cut, a kernel panic); testing that needs a VM you cut off or a "
       "fault-injecting block device.",
       "What does a SIGKILL test prove, then, and what does it not?",
       ["No: the page cache outlives the process",
        "It does: without fsync the last line is lost", "It does, if the kill comes between write and fsync"], GRADED),
    _q("q26", "6", "Restate calls your service; a Temporal worker asks the server for work. Why does that matter "
                   "when the process dies?",
       "It does not: both retry.",
       "Restate pushes: the server keeps each invocation and calls the service's endpoint over HTTP, so a dead "
       "endpoint is a failed call the server retries against the same deployment until something answers there, and "
       "the new handler replays its journal. Temporal pulls: workers poll a task queue, so any worker that polls it "
       "picks the work up and nothing needs an address. Push suits serverless endpoints that sleep between calls; "
       "pull needs no inbound network path to the workers and scales by adding pollers.",
       "What does an invocation pinned to a deployment mean for a rolling deploy?",
       ["Push: the server retries the endpoint; pull: any worker takes it",
        "Nothing: in both, the same process that died resumes its run when it restarts",
        "Push is faster, so the endpoint needs no retry policy of its own at all"], "A"),
    _q("q27", "6", "Two resumers start the same order at the same moment. How does a Restate virtual object keep them "
                   "from both charging, and how is that different from a lock?",
       "It takes a database lock for the order.",
       "A virtual object keyed by order id runs one exclusive handler invocation per key at a time, queued by the "
       "server; the second resumer's send with the same idempotency key finds the same invocation and attaches to "
       "it. No lock is held by a process, so none is left behind by a process that dies. But there is a lease all "
       "the same: each attempt runs under the service's inactivity_timeout plus abort_timeout, and when they run "
       "out the server aborts the attempt and retries the invocation. A ctx.run whose result was not journaled "
       "runs again, while the old attempt's thread may still be running it: a zombie attempt, as on Temporal. The "
       "object serialises invocations, not the effects of attempts, so the charge still carries a key from the "
       "order and the step.",
       "What would a shared (read-only) handler on the same object be allowed to do?",
       ["Each resumer takes a row lock before charging",
        "One exclusive invocation per key; the charge still needs its key",
        "The object serialises everything, so the charge needs no idempotency key"], GRADED),
    _q("q28", "6", "A Restate order waits two days for a human's approval. What holds the wait?",
       "The handler's process sleeps until the approval comes.",
       "An awakeable: the handler records it in the journal and the invocation suspends; the endpoint can be stopped "
       "or killed and no process holds anything. Resolving the awakeable's id from outside (an HTTP call to the "
       "server) wakes the invocation, which replays its journal on whatever process serves the endpoint then. The "
       "suspended invocation still holds the object's key, though: every other exclusive call on ORD-8842 (cancel "
       "the order, change the address) queues behind it for the two days. Keep long waits off the order's "
       "exclusive handler: a restate.Workflow waits on a durable promise that a shared handler resolves, and "
       "shared handlers never queue behind it.",
       "How would you add a deadline to that wait, and who runs the code after it?",
       ["A journaled awakeable; the suspended call still holds the order's key",
        "An awakeable; other calls on the order go ahead meanwhile",
        "An asyncio.sleep in the handler, made durable because Restate journals it"], GRADED),
    _q("q29", "6", "You deploy a new version of the Restate order handler while orders are mid-flight. What happens "
                   "to them?",
       "They switch to the new code at their next step.",
       "Each invocation stays on the deployment it started on, so in-flight orders finish on the old code and new "
       "orders go to the newest deployment. Keep the old deployment serving until its invocations drain; removing it "
       "early leaves them retrying against an address that is gone.",
       "How would you know when the old deployment can be removed?",
       ["They move to the newest deployment; the new code replays them",
        "They fail with a nondeterminism error unless patched",
        "They stay on their own deployment, which must serve until they drain"], GRADED),
    _q("q30", "8", "Your agent runs on Pydantic AI's Temporal integration, so every tool call is an activity. What does "
                   "that durability not cover?",
       "Nothing: an activity runs once, so every tool runs once.",
       "It records each model reply and each tool call's result, so a crash never makes the model choose again. It "
       "does not derive idempotency keys: after a tool's effect commits and before its activity completes, the retry "
       "is a new request, and without a key a second charge. The keys are yours, from the run's durable identity "
       "(the workflow id and run id; DBOS's ctx.run_id; Restate's invocation id) and the model's tool call id. And "
       "read what the integration records: DBOS's makes the model requests steps but not the function tools; "
       "Restate's journals tools only with auto_wrap_tools.",
       "Outside any engine, why is a key built on ctx.run_id no key at all?",
       ["Model calls: each model call is sent again after a crash",
        "An effect repeated before its record lands",
        "Nothing, as long as every tool is registered with the agent's toolset"], GRADED),
    _q("q31", "8", "Your agent runs on an engine that records each model reply before any tool runs. The model asks "
                   "for send_confirmation twice in one reply (two emails). How do you key the two calls?",
       "By the order, the turn and the tool, as before.",
       "Each call its own key: the run's durable identity, that block's tool_use id and the tool. The id is a stable "
       "part because the engine recorded the reply before the tools ran, so every replay hands each call the same "
       "id. A key from the order, the turn and the tool gives both emails one key: the email service answers the "
       "second with the first one's record, and one email goes out where the model asked for two (two charges of "
       "different amounts would get a 400 for the second: same key, other parameters). A charge and a reservation "
       "never meet: the payment and the inventory services each keep their own keys. Where the reply is not durable before the tools run "
       "(LangGraph's functional API saves task results in the background) the id is no key: use the turn, the tool "
       "and the call's place among that tool's calls. And know what the integration does with the calls: Pydantic "
       "AI on Temporal runs them concurrently; on DBOS run them one at a time (parallel_execution_mode="
       "\"sequential\"), because DBOS numbers steps as they start and a replay can hand each call the other's "
       "result; Restate's RestateAgent runs them in turn, in the reply's order, through a turnstile.",
       "What changes if the model's reply is not recorded before the tools run?",
       ["The order, the turn and the tool: one key for both calls",
        "A fresh uuid4() for each call, made when it runs",
        "The run's identity plus the block's own tool_use id and tool name"], GRADED),
    _q("q32", "8", "You must choose between Pydantic AI's Temporal and DBOS integrations and Restate's. What decides "
                   "it?",
       "Whichever has the most stars.",
       "What each records, what you can operate, and how it recovers. Temporal needs its server and workers that "
       "poll it; every model request and tool call is an activity, and a dead worker's activity waits out its "
       "heartbeat timeout (30 s for a model request by default) or, for a tool, its whole start-to-close timeout "
       "(60 s by default): tune both. DBOS is a library on your own Postgres or SQLite, recovers on the next "
       "launch, leaves function tools out of its steps until you put them in, and should run one reply's tool calls "
       "one at a time. Restate pushes to your endpoint, "
       "journals tools only with auto_wrap_tools and runs one reply's tool calls in turn. On all three the keys are "
       "yours: crash each under the harness before you choose.",
       "Which would you pick for an agent that waits two days for a human, and why?",
       ["The one whose integration derives the idempotency keys for you",
        "What each records, what you can operate, and how it recovers",
        "Always Temporal: it is the only one that keeps a history"], "B"),  # lesson 8's practice question
    _q("q33", "9", "A Temporal agent passes the whole conversation to every model activity. How does its history grow "
                   "with the number of turns N?",
       "It grows a little with every activity, like any log.",
       "With the square of N: Temporal records every activity's input, and each model activity's input is the whole "
       "conversation so far, so turn n adds about n times a turn's bytes. A long agent meets the server's history "
       "limit (terminated at 50 MB or 51,200 events) part way through; the fixes bound what one run records: "
       "continue-as-new with a compacted state, or payloads kept outside the history.",
       "What does the SDK tell the workflow before the limit, and what does the server only log?",
       ["Roughly N squared: each activity input repeats every earlier turn",
        "Linearly: Temporal stores only what each activity returned",
        "Not at all after the first turn: the history deduplicates payloads"], "A"),  # lesson 9's practice question
    _q("q34", "9", "Temporal terminated your long agent at its history size limit. You start the backlog again as a new "
                   "run of the same workflow id. Which idempotency key keeps its orders from being charged twice?",
       "Any key Temporal gives us: the run id and the activity id are unique.",
       "One that every run doing the same step makes alike: the workflow id plus a turn count carried from run to run "
       "(or the business identity, the order and the tool). The new run has a new run id and numbers its activities "
       "from 1 again, and it redoes the terminated run's turns because the history holding their answers is gone: a "
       "run-id key makes every one of those effects again, a workflow-id and activity-id key collides with other "
       "steps after a continue-as-new. The same holds for a reset.",
       "Why does a run-id key survive a plain continue-as-new loop, and when does it not?",
       ["The run id plus the activity id, as Temporal's documentation suggests",
        "A fresh uuid4() made when the tool activity starts",
        "The workflow id plus a turn count carried from run to run, never the run id"], GRADED),
    _q("q35", "9", "Your DBOS agent compacts its conversation every few turns with a summary the model writes. Where "
                   "must the summary call live?",
       "Anywhere: the summary is only text, it charges nothing.",
       "In a durable step of its own (a @DBOS.step; an activity on Temporal, a node on LangGraph, a ctx.run on "
       "Restate), so it is recorded once and a recovery reads it back. DBOS recovers by running the workflow body "
       "again: a summary asked there is asked again, a repeated paid call and, with a real model, a different summary "
       "from which the recovered run goes on with a conversation the crashed one never had.",
       "What else grows with a long conversation, even on an engine that does not store step inputs?",
       ["In a step, whose recorded answer a recovery reads back",
        "In the workflow body, where it sees the latest conversation",
        "In a background thread, so the workflow does not wait for it"], GRADED),
) + STREAMING


__all__ = ["BANK"]
