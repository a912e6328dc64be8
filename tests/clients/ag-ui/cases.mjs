// The real @ag-ui/client against baton's AG-UI endpoint: every case of one test file, in one Node
// process. It reads its settings as JSON on stdin ({servers: {name: {url, token}}, cases: [...],
// release}) and prints one JSON object: for each case, what the client saw. The Python tests
// assert on it (tests/server/test_ag_ui_client*.py); nothing is judged here.
//
// HttpAgent.runAgent runs every event through the client's own verifier (it throws on a protocol
// violation); a tee of each response keeps the raw SSE frames, so the tests also see baton's `id:`
// cursors, which the client ignores by design.

import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const here = fileURLToPath(new URL(".", import.meta.url));

const settings = JSON.parse(await readStdin());
const results = {};
// An aborted run tears its response down inside the client, which can reject after the run
// has ended (the body reader's cancel); kept as a note, it must not end the process.
const unhandled = [];
process.on("unhandledRejection", (reason) => unhandled.push(String(reason)));

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

function server(name) {
  const found = settings.servers[name];
  if (!found) throw new Error(`no server ${name} in the settings`);
  return found;
}

function auth(name) {
  const token = server(name).token;
  return token ? { Authorization: `Bearer ${token}` } : {};
}

// The frames of an SSE body, as the WHATWG rules say: fields up to a blank line.
function parseFrames(text) {
  const frames = [];
  for (const block of text.split("\n\n")) {
    let id = null;
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("id:")) id = line.slice(3).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
    if (data.length) frames.push({ id, event: JSON.parse(data.join("\n")) });
  }
  return frames;
}

// An HttpAgent whose responses are also read raw (ids included); `raw` holds each run's frames.
function agentOf(name, threadId, headers = {}) {
  const raw = [];
  const fetchTee = async (url, init) => {
    const response = await fetch(url, init);
    if (!response.body) return response;
    const [mine, theirs] = response.body.tee();
    const run = { status: response.status, text: "", read: null };
    raw.push(run);
    run.read = (async () => {
      const reader = theirs.getReader();
      const decoder = new TextDecoder();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          run.text += decoder.decode(value, { stream: true });
        }
      } catch {
        // the client aborted: what arrived is kept
      }
    })();
    return new Response(mine, { status: response.status, headers: response.headers });
  };
  const agent = new HttpAgent({
    url: `${server(name).url}/ag-ui`,
    threadId,
    headers: { ...auth(name), ...headers },
    fetch: fetchTee,
  });
  agent.raw = raw;
  return agent;
}

let userIds = 0;
function say(agent, text) {
  userIds += 1;
  agent.addMessage({ id: `user-${userIds}-${Date.now()}`, role: "user", content: text });
}

// A promise that resolves after `ms`, and the means to stop its timer (so it keeps nothing alive).
function bounded(ms) {
  let timer;
  const elapsed = new Promise((resolve) => { timer = setTimeout(() => resolve("elapsed"), ms); });
  return { elapsed, stop: () => clearTimeout(timer) };
}

// One runAgent: the events the client verified and applied, its result, or the error it threw.
// A run the client aborted (abortRun) may leave runAgent's promise unsettled with nothing left to
// settle it; it is then taken as ended a few seconds after the abort, since an unsettled promise
// with no work left ends Node with exit 13 and every case's results lost.
async function run(agent, parameters = {}, onEvent = null) {
  const events = [];
  const before = agent.raw.length;
  let error = null;
  let result = null;
  let aborted;
  const abort = new Promise((resolve) => { aborted = resolve; });
  const abortRun = agent.abortRun.bind(agent);
  agent.abortRun = () => { aborted(); abortRun(); };
  const settled = agent.runAgent(parameters, {
    onEvent: ({ event }) => {
      events.push(event);
      if (onEvent) onEvent(event, agent);
    },
  }).then((value) => { result = value; }, (exc) => {
    error = String(exc && exc.message ? exc.message : exc);
  });
  let grace = null; // counted from the abort
  await Promise.race([settled, abort.then(() => { grace = bounded(5000); return grace.elapsed; })]);
  if (grace) grace.stop();
  agent.abortRun = abortRun;
  const mine = agent.raw.slice(before);
  // The tee's copy read to its end (or its abort); a copy whose other half the client cancelled
  // may never end, so the wait is bounded (a bound, not a pause: it ends when the reads do).
  const limit = bounded(2000);
  await Promise.race([Promise.all(mine.map((r) => r.read)), limit.elapsed]);
  limit.stop();
  const frames = mine.flatMap((r) => parseFrames(r.text));
  return {
    events,
    frames,
    error,
    result: result ? result.result ?? null : null,
    newMessages: result ? result.newMessages : null,
    pendingInterrupts: agent.pendingInterrupts,
  };
}

function messagesOf(agent) {
  return JSON.parse(JSON.stringify(agent.messages));
}

// A raw POST, for what the client would refuse to send or to see (bad bodies, dropped streams).
async function post(name, body, headers = {}, contentType = "application/json") {
  const response = await fetch(`${server(name).url}/ag-ui`, {
    method: "POST",
    headers: { "Content-Type": contentType, Accept: "text/event-stream", ...auth(name), ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, contentType: response.headers.get("content-type"), text };
}

const cases = {
  // Two sub-agent invocations started and closed, text streamed, both pictures; then a follow-up.
  async paint_and_follow_up() {
    const agent = agentOf("main", `paint-${Date.now()}`);
    say(agent, "paint a fox and paint a heron");
    const first = await run(agent);
    say(agent, "now paint a swan");
    const second = await run(agent);
    // The pictures as a browser opens them: the URL alone, no header.
    const urls = [first, second].flatMap((r) =>
      r.events.filter((e) => e.type === "SUBAGENT_FINISHED").flatMap((e) => e.result?.mediaUrls ?? []),
    );
    const pictures = [];
    for (const url of urls) {
      const response = await fetch(url);
      const body = new Uint8Array(await response.arrayBuffer());
      pictures.push({ url, status: response.status, type: response.headers.get("content-type"),
                      png: body[1] === 0x50 && body[2] === 0x4e && body[3] === 0x47 });
    }
    // The whole thread (both sessions) again, by a client that holds nothing: one run.
    const fresh = agentOf("main", agent.threadId, { "Last-Event-ID": "0" });
    const replay = await run(fresh);
    return { first, second, pictures, messages: messagesOf(agent), replay,
             replayed: messagesOf(fresh) };
  },

  // "publish a haiku": the approval is an interrupt; a resume approves it. A resume whose
  // payload does not fit is refused first (422, nothing answered).
  async approve() {
    const agent = agentOf("main", `approve-${Date.now()}`);
    say(agent, "publish a haiku");
    const asked = await run(agent);
    const interrupt = agent.pendingInterrupts[0];
    const bad = await post("main", {
      threadId: agent.threadId,
      runId: "bad-resume",
      messages: agent.messages,
      resume: [{ interruptId: interrupt.id, status: "resolved", payload: { approve: "yes" } }],
    });
    const resume = buildResumeArray(agent.pendingInterrupts, {
      [interrupt.id]: { status: "resolved", payload: { approved: true, reason: "fine by me" } },
    });
    const answered = await run(agent, { resume });
    return { asked, bad, answered };
  },

  // The same, declined: one thread with approved: false, one with the interrupt cancelled.
  async decline() {
    const agent = agentOf("main", `decline-${Date.now()}`);
    say(agent, "publish a haiku");
    const asked = await run(agent);
    const interrupt = agent.pendingInterrupts[0];
    const resume = buildResumeArray(agent.pendingInterrupts, {
      [interrupt.id]: { status: "resolved", payload: { approved: false, reason: "not today" } },
    });
    const answered = await run(agent, { resume });
    const other = agentOf("main", `decline-cancel-${Date.now()}`);
    say(other, "publish a haiku");
    const asked2 = await run(other);
    const cancel = buildResumeArray(other.pendingInterrupts, {
      [other.pendingInterrupts[0].id]: { status: "cancelled" },
    });
    const cancelled = await run(other, { resume: cancel });
    return { asked, answered, asked2, cancelled };
  },

  // A file question (the reviewer's request_file_upload), answered inline through resume.
  async upload() {
    const agent = agentOf("main", `upload-${Date.now()}`);
    say(agent, "review my notes");
    const asked = await run(agent);
    const interrupt = agent.pendingInterrupts[0];
    const data = Buffer.from("my notes: ship it on Friday\n").toString("base64");
    const resume = buildResumeArray(agent.pendingInterrupts, {
      [interrupt.id]: {
        status: "resolved",
        payload: { url: `data:text/plain;base64,${data}`, name: "notes.txt", mediaType: "text/plain" },
      },
    });
    const answered = await run(agent, { resume });
    return { asked, answered };
  },

  // Cancel on purpose: a second client on the same thread sends forwardedProps.baton.cancel while
  // the first streams; both runs end with the cancelled outcome, everything closed.
  async cancel() {
    const threadId = `cancel-${Date.now()}`;
    const agent = agentOf("main", threadId);
    say(agent, "sleep on the plan");
    let started;
    const working = new Promise((resolve) => (started = resolve));
    const running = run(agent, {}, (event) => {
      if (event.type === "SUBAGENT_STARTED") started();
    });
    await working;
    const stopper = agentOf("main", threadId);
    stopper.setMessages(messagesOf(agent).filter((m) => m.role === "user"));
    const stop = await run(stopper, { forwardedProps: { baton: { cancel: true } } });
    // A cancel while a question waits: the client must address the interrupt in the same run.
    const asking = agentOf("main", `cancel-asked-${Date.now()}`);
    say(asking, "publish a haiku");
    const asked = await run(asking);
    const [pending] = asking.pendingInterrupts;
    const resume = buildResumeArray(asking.pendingInterrupts, { [pending.id]: { status: "cancelled" } });
    const cancelled = await run(asking, { resume, forwardedProps: { baton: { cancel: true } } });
    return { running: await running, stop, asked, cancelled };
  },

  // The lead's model fails: the run ends with RUN_ERROR.
  async failing_model() {
    const agent = agentOf("failing", `fail-${Date.now()}`);
    say(agent, "paint a fox");
    return { run: await run(agent) };
  },

  // Bodies baton refuses before any stream: a 4xx with one line of JSON.
  async bad_bodies() {
    const user = [{ id: "u1", role: "user", content: "paint a fox" }];
    const shapes = {
      not_json: ["{threadId:", {}, "application/json"],
      not_json_media: [JSON.stringify({ threadId: "x", runId: "r", messages: user }), {}, "text/plain"],
      empty_object: [{}, {}],
      messages_not_a_list: [{ threadId: "t-bad-1", runId: "r", messages: "paint a fox" }, {}],
      new_thread_without_a_message: [{ threadId: "t-bad-2", runId: "r", messages: [] }, {}],
      bad_thread_id: [{ threadId: "no spaces here", runId: "r", messages: user }, {}],
      image_part: [
        {
          threadId: "t-bad-3",
          runId: "r",
          messages: [
            {
              id: "u1",
              role: "user",
              content: [{ type: "image", source: { type: "url", value: "https://example.com/a.png" } }],
            },
          ],
        },
        {},
      ],
      blank_message: [{ threadId: "t-bad-4", runId: "r", messages: [{ id: "u1", role: "user", content: "  " }] }, {}],
      bad_last_event_id: [{ threadId: "t-bad-5", runId: "r", messages: user }, { "Last-Event-ID": "yesterday" }],
      unknown_option: [
        { threadId: "t-bad-6", runId: "r", messages: user, forwardedProps: { baton: { cancle: true } } },
        {},
      ],
    };
    const answers = {};
    for (const [name, [body, headers, type]] of Object.entries(shapes)) {
      answers[name] = await post("main", body, headers, type);
    }
    // The real client on a request baton refuses: runAgent fails with the HTTP status.
    const agent = agentOf("main", "not a thread id");
    say(agent, "paint a fox");
    answers.client = await run(agent);
    if (settings.servers.main.token) {
      answers.no_token = await post("main", { threadId: "t-bad-7", runId: "r", messages: user }, {
        Authorization: "Bearer wrong-token-0123456789",
      });
    }
    return answers;
  },

  // The connection drops mid-run; the client comes back with the Last-Event-ID of the last frame
  // it got, through HttpAgent (so the resumed stream is verified too), and gets every event it
  // missed, once. A replay of the whole thread (Last-Event-ID: 0) is the reference.
  async drop_and_resume() {
    const threadId = `drop-${Date.now()}`;
    const messages = [{ id: "drop-user-1", role: "user", content: "survey the north" }];
    const controller = new AbortController();
    const response = await fetch(`${server("main").url}/ag-ui`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream", ...auth("main") },
      body: JSON.stringify({ threadId, runId: "drop-1", messages }),
      signal: controller.signal,
    });
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let text = "";
    let complete = [];
    while (!complete.some((f) => f.event.type === "TOOL_CALL_END" && f.event.subagentRunId)) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      complete = parseFrames(text.slice(0, text.lastIndexOf("\n\n") + 2));
    }
    controller.abort(); // the connection drops: the session goes on
    const received = complete;
    const lastId = [...received].reverse().find((f) => f.id)?.id;
    writeFileSync(settings.release, "go"); // the surveyor may finish now
    const agent = agentOf("main", threadId, { "Last-Event-ID": lastId });
    agent.setMessages(messages);
    const resumed = await run(agent);
    const reference = agentOf("main", threadId, { "Last-Event-ID": "0" });
    const whole = await run(reference);
    return { received, lastId, resumed, whole };
  },

  // The client aborts its run and comes back on the same thread with no new message and no
  // cursor: what it holds is not sent again, what it missed is, then the live run.
  async abort_and_rejoin() {
    const threadId = `rejoin-${Date.now()}`;
    const agent = agentOf("main", threadId);
    say(agent, "survey the south");
    const first = await run(agent, {}, (event, target) => {
      if (event.type === "TOOL_CALL_START" && event.subagentRunId) target.abortRun();
    });
    const held = messagesOf(agent);
    const again = await run(agent);
    const reference = agentOf("main", threadId, { "Last-Event-ID": "0" });
    const whole = await run(reference);
    return { first, held, again, messages: messagesOf(agent), whole, reference: messagesOf(reference) };
  },

  // docs/ag-ui.md's front end (the settings name the page), run as it is written (its import
  // pointed at this folder's client, since it runs from a temporary folder of its own).
  async docs_front_end() {
    const doc = readFileSync(settings.docs, "utf8");
    const block = doc.split("<!-- example: front-end -->")[1].split("<!-- /example -->")[0];
    const code = block.split("```js\n")[1].split("```")[0];
    const client = pathToFileURL(join(here, "node_modules", "@ag-ui", "client", "dist", "index.mjs"));
    const script = join(mkdtempSync(join(tmpdir(), "ag-ui-docs-")), "front-end.mjs");
    writeFileSync(script, code.replace('from "@ag-ui/client"', `from "${client.href}"`));
    process.env.AGUI_URL = `${server("main").url}/ag-ui`;
    process.env.BATON_TOKEN = server("main").token ?? "";
    let printed = "";
    const write = process.stdout.write.bind(process.stdout);
    process.stdout.write = (chunk, ...rest) => {
      printed += String(chunk);
      return true;
    };
    let error = null;
    try {
      await import(pathToFileURL(script).href);
    } catch (exc) {
      error = String(exc && exc.stack ? exc.stack : exc);
    } finally {
      process.stdout.write = write;
    }
    return { printed, error };
  },

  // The same run on Redis, its sub-agents on `baton worker` processes.
  async redis_workers() {
    const agent = agentOf("redis", `redis-${Date.now()}`);
    say(agent, "paint a fox and paint a heron");
    const first = await run(agent);
    say(agent, "publish a haiku");
    const asked = await run(agent);
    const resume = buildResumeArray(agent.pendingInterrupts, Object.fromEntries(
      agent.pendingInterrupts.map((i) => [i.id, { status: "resolved", payload: { approved: true } }]),
    ));
    const answered = await run(agent, { resume });
    return { first, asked, answered };
  },
};

for (const name of settings.cases) {
  process.stderr.write(`case ${name}\n`); // on a failure, the last one named is where it stopped
  try {
    results[name] = await cases[name]();
  } catch (exc) {
    results[name] = { crashed: String(exc && exc.stack ? exc.stack : exc) };
  }
}
results._unhandled = unhandled;
process.stdout.write(JSON.stringify(results));
