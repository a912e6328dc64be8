// The live view of one session: folds its Server-Sent Events into the page.
// The server paints the session as it stands (first_paint.py) and names the log's last cursor;
// the stream starts after it. EventSource reconnects by itself and sends Last-Event-ID, so
// nothing is missed or repeated.
"use strict";

const SESSION = document.querySelector("meta[name=baton-session]").content;
const CURSOR = document.querySelector("meta[name=baton-cursor]").content;
const base = `/sessions/${encodeURIComponent(SESSION)}`;
const $ = (id) => document.getElementById(id);
const TERMINAL = ["completed", "incomplete", "failed", "cancelled", "timed_out"];
let eventCount = Number($("event-count").textContent) || 0;
let leadBreak = $("lead-text").dataset.break === "true"; // a new lead round: a new paragraph
let roundChars = Number($("lead-text").dataset.roundChars) || 0; // the current round's text
let retries = Number($("retries").dataset.count) || 0;

// A tool's file:// URL, as the server serves it: the tools write under
// <media dir>/<session>/..., served at /media/<session>/...; the page is told no server path.
function mediaUrl(url) {
  if (!url.startsWith("file:")) return url;
  const path = new URL(url).pathname;
  const at = path.lastIndexOf(`/${SESSION}/`);
  return at < 0 ? url : "/media" + path.slice(at);
}

function showMedia(box, urls) {
  box.replaceChildren();
  for (const url of urls) {
    const href = mediaUrl(url);
    if (/\.(png|jpe?g|gif|webp)$/i.test(href) || href.startsWith("data:image/")) {
      const img = document.createElement("img");
      img.src = href;
      img.alt = href.split("/").pop();
      box.append(img);
    } else {
      const link = document.createElement("a");
      link.href = href;
      link.textContent = href;
      box.append(link);
    }
  }
}

function setStatus(status) {
  const badge = $("status");
  badge.dataset.status = status;
  badge.textContent = status;
}

function card(name) {
  let node = document.querySelector(`.agent[data-agent="${CSS.escape(name)}"]`);
  if (node) return node;
  node = document.createElement("article");
  node.className = "agent";
  node.dataset.agent = name;
  for (const part of ["status", "name", "profile", "worker", "progress", "retries", "media"]) {
    const child = document.createElement("div");
    child.className = part;
    node.append(child);
  }
  node.querySelector(".name").textContent = name;
  setAgentStatus(node, "spawned");
  $("agents").append(node);
  return node;
}

// Where a sub-agent runs, worded as the server's paint words it (baton.session.view.describe_placement):
// the worker that claimed it, or that none has claimed it in time.
function setPlacement(node, text, waiting) {
  const line = node.querySelector(".worker");
  line.textContent = text;
  line.dataset.waiting = String(waiting);
}

function setAgentStatus(node, status) {
  const badge = node.querySelector(".status");
  badge.dataset.status = status;
  badge.textContent = status;
  node.dataset.status = status;
}

function wireApproval(node) {
  const note = node.querySelector(".note");
  const callId = node.dataset.call;
  node.querySelector("button.approve").addEventListener("click", () => decide(node, callId, true, note));
  node.querySelector("button.decline").addEventListener("click", () => decide(node, callId, false, note));
}

function addApproval(agent, call) {
  const selector = `.approval[data-agent="${CSS.escape(agent)}"][data-call="${CSS.escape(call.call_id)}"]`;
  if (document.querySelector(selector)) return; // painted by the server already
  const node = document.createElement("div");
  node.className = "approval";
  node.dataset.agent = agent;
  node.dataset.call = call.call_id;
  const text = document.createElement("p");
  const code = document.createElement("code");
  code.textContent = `${call.name}(${call.arguments})`;
  const id = document.createElement("span");
  id.className = "muted call-id";
  const samp = document.createElement("samp");
  samp.textContent = call.call_id;
  id.append("call id ", samp);
  text.append(`${agent} asks to run `, code, " ", id);
  const yes = document.createElement("button");
  yes.className = "approve";
  yes.textContent = "Approve";
  const no = document.createElement("button");
  no.className = "decline";
  no.textContent = "Decline";
  const note = document.createElement("span");
  note.className = "muted note";
  node.append(text, yes, " ", no, " ", note);
  wireApproval(node);
  $("approvals").append(node);
  $("no-approvals").hidden = true;
}

async function decide(node, callId, approved, note) {
  for (const button of node.querySelectorAll("button")) button.disabled = true;
  const response = await postJSON(`${base}/approvals/${encodeURIComponent(callId)}`, { approved });
  if (response.ok) {
    note.textContent = approved ? "approved, waiting for the agent…" : "declined";
  } else {
    note.textContent = (await response.json()).detail || `error ${response.status}`;
  }
}

function removeApproval(agent, callId) {
  const node = document.querySelector(
    `.approval[data-agent="${CSS.escape(agent)}"][data-call="${CSS.escape(callId)}"]`,
  );
  if (node) node.remove();
  $("no-approvals").hidden = document.querySelectorAll(".approval, .question").length > 0;
}

// A question for a file or an image: upload one, pick one of the session's pictures (an image
// question), give a URL, or cancel. Each goes to the one route that answers any question.
function wireQuestion(node) {
  const id = node.dataset.question;
  const note = node.querySelector(".note");
  node.querySelector("button.upload").addEventListener("click", () => {
    const file = node.querySelector("input.file").files[0];
    if (!file) { note.textContent = "choose a file first"; return; }
    const form = new FormData();
    form.append("file", file, file.name);
    answer(node, id, { method: "POST", credentials: "same-origin", body: form }, note);
  });
  node.querySelector("button.use-url").addEventListener("click", () => {
    const url = node.querySelector("input.url").value.trim();
    if (!url) { note.textContent = "type a URL first"; return; }
    answer(node, id, jsonPost({ url }), note);
  });
  node.querySelector("button.decline").addEventListener("click",
    () => answer(node, id, jsonPost({ cancel: true }), note));
  fillPicker(node);
}

// An image question's picker: the session's own pictures, shown on the page so far.
function fillPicker(node) {
  const picker = node.querySelector(".picker");
  if (!picker) return;
  const seen = new Set([...picker.querySelectorAll("img")].map((img) => img.getAttribute("src")));
  for (const img of document.querySelectorAll(".agent .media img, #final-media img")) {
    const src = img.getAttribute("src");
    if (seen.has(src)) continue;
    seen.add(src);
    const pick = document.createElement("button");
    pick.className = "pick";
    pick.title = `use ${src.split("/").pop()}`;
    const thumb = document.createElement("img");
    thumb.src = src;
    thumb.alt = src.split("/").pop();
    pick.append(thumb);
    const body = src.startsWith("/media/") ? { media: src } : { url: src };
    pick.addEventListener("click",
      () => answer(node, node.dataset.question, jsonPost(body), node.querySelector(".note")));
    picker.append(pick);
  }
}

function fillPickers() {
  for (const node of document.querySelectorAll(".question[data-kind=image]")) fillPicker(node);
}

function addQuestion(e) {
  if (document.querySelector(`.question[data-question="${CSS.escape(e.question_id)}"]`)) return;
  const node = document.createElement("div");
  node.className = "question";
  node.dataset.agent = e.agent;
  node.dataset.question = e.question_id;
  node.dataset.kind = e.kind;
  const text = document.createElement("p");
  const id = document.createElement("span");
  id.className = "muted call-id";
  const samp = document.createElement("samp");
  samp.textContent = e.question_id;
  id.append("question ", samp);
  const what = e.kind === "upload" ? "a file" : "an image";
  text.append(`${e.agent} asks for ${what}${e.prompt ? `: ${e.prompt}` : ""} `, id);
  const file = document.createElement("input");
  file.type = "file";
  file.className = "file";
  file.accept = e.accept.join(",") || (e.kind === "image" ? "image/*" : "");
  const upload = button("upload", "Upload");
  const url = document.createElement("input");
  url.type = "url";
  url.className = "url";
  url.placeholder = "or a URL (https:// or data:)";
  const note = document.createElement("span");
  note.className = "muted note";
  node.append(text, file, " ", upload, " ");
  if (e.kind === "image") {
    const picker = document.createElement("div");
    picker.className = "picker";
    node.append(picker);
  }
  node.append(url, " ", button("use-url", "Use URL"), " ", button("decline", "Cancel"), " ", note);
  wireQuestion(node);
  $("approvals").append(node);
  $("no-approvals").hidden = true;
}

function button(className, label) {
  const node = document.createElement("button");
  node.className = className;
  node.textContent = label;
  return node;
}

async function answer(node, id, init, note) {
  for (const control of node.querySelectorAll("button, input")) control.disabled = true;
  const response = await fetch(`${base}/questions/${encodeURIComponent(id)}`, init);
  if (response.ok) {
    const said = await response.json();
    note.textContent = said.outcome === "provided" ? "sent, waiting for the agent…" : said.outcome;
    return;
  }
  note.textContent = (await response.json()).detail || `error ${response.status}`;
  if (response.status !== 409) { // still open: let the person try again
    for (const control of node.querySelectorAll("button, input")) control.disabled = false;
  }
}

function removeQuestion(id) {
  const node = document.querySelector(`.question[data-question="${CSS.escape(id)}"]`);
  if (node) node.remove();
  $("no-approvals").hidden = document.querySelectorAll(".approval, .question").length > 0;
}

// A failed reply the model client retries takes its streamed text back: drop it from the end of
// the lead's current round (never from an earlier round), then let the retry stream anew.
function retractLeadText(chars) {
  const lead = $("lead-text");
  const dropped = Math.min(chars, roundChars);
  if (dropped <= 0) return;
  let text = lead.textContent.slice(0, lead.textContent.length - dropped);
  roundChars -= dropped;
  if (roundChars === 0 && text.endsWith("\n\n") && text.length > 2) {
    text = text.slice(0, -2); // the round's paragraph break goes with its last character
    leadBreak = true;
  }
  lead.textContent = text;
}

function describeBudget(e) {
  const part = (used, cap, unit) =>
    cap == null ? `${used.toLocaleString("en")} ${unit}`
      : `${used.toLocaleString("en")}/${cap.toLocaleString("en")} ${unit}`;
  return `budget: ${part(e.calls, e.max_calls, "model calls")}, ${part(e.tokens, e.max_tokens, "tokens")}`;
}

function budgetSpent(e) {
  return (e.max_calls != null && e.calls >= e.max_calls)
    || (e.max_tokens != null && e.tokens >= e.max_tokens);
}

function showInvented(urls) {
  if (!urls.length) return;
  const box = $("invented");
  box.textContent = `The answer cites URLs no tool produced: ${urls.join(", ")}`;
  box.hidden = false;
}

function jsonPost(body) {
  return {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  };
}

function postJSON(path, body) {
  return fetch(path, jsonPost(body));
}

const handlers = {
  "session.started": (e) => {
    setStatus("running");
    $("task").textContent = e.task;
    $("model").textContent = e.offline ? `model: ${e.model} (offline: built-in, canned answers)` : `model: ${e.model}`;
  },
  "round.started": (e) => {
    if (e.agent !== "lead") return;
    if ($("lead-text").textContent) leadBreak = true;
    roundChars = 0;
  },
  "text.delta": (e) => {
    if (e.agent !== "lead") return;
    $("lead-text").append(leadBreak ? `\n\n${e.text}` : e.text);
    if (leadBreak) roundChars = 0;
    roundChars += e.text.length;
    leadBreak = false;
  },
  "text.retracted": (e) => { if (e.agent === "lead") retractLeadText(e.chars); },
  "model.retried": (e) => {
    retries += 1;
    const line = $("retries");
    line.textContent = `model retries: ${retries} · last ${e.agent}: attempt ${e.attempt} failed`
      + ` (${e.reason}); retrying in ${e.delay_s.toFixed(1)} s`;
    line.hidden = false;
    if (e.agent !== "lead") {
      const node = card(e.agent);
      const count = Number(node.dataset.retries || 0) + 1;
      node.dataset.retries = String(count);
      node.querySelector(".retries").textContent = `model retries: ${count}`;
    }
  },
  "budget.updated": (e) => {
    const line = $("budget");
    line.textContent = describeBudget(e);
    line.dataset.spent = String(budgetSpent(e));
    line.hidden = false;
  },
  "answer.checked": (e) => {
    if (e.missing_media.length) {
      const box = $("missing-media");
      const urls = e.missing_media.map(mediaUrl).join(", ");
      box.textContent = `Appended to the answer (it left them out): ${urls}`;
      box.hidden = false;
    }
    showInvented(e.invented_urls);
    if (e.missing_items && e.missing_items.length) {
      const box = $("missing-items");
      box.textContent = `Declared items without a result: ${e.missing_items.join(", ")}`;
      box.hidden = false;
    }
  },
  "agent.spawned": (e) => {
    if (e.agent === "lead") return;
    card(e.agent).querySelector(".profile").textContent = `profile: ${e.profile}`;
  },
  "agent.unclaimed": (e) => {
    const node = card(e.agent);
    node.dataset.pool = e.pool;
    setPlacement(node, e.workers == null ? "waiting for the session's own worker (at capacity)"
      : `waiting for a worker of pool ${e.pool}`, true);
  },
  "agent.claimed": (e) => setPlacement(card(e.agent), `worker ${e.worker}`, false),
  "agent.progress": (e) => {
    const node = card(e.agent);
    if (node.dataset.status !== "done") setAgentStatus(node, "working");
    node.querySelector(".progress").textContent = e.content;
  },
  "agent.result": (e) => {
    const node = card(e.agent);
    setAgentStatus(node, "done");
    node.querySelector(".progress").textContent = e.content;
    showMedia(node.querySelector(".media"), e.media_urls);
    fillPickers();
  },
  "agent.exited": (e) => {
    const node = card(e.agent);
    if (e.reason !== "finished") setAgentStatus(node, e.reason);
    if (node.querySelector(".worker").dataset.waiting === "true") {
      setPlacement(node, `no worker of pool ${node.dataset.pool} claimed it`, false);
    }
  },
  "approval.requested": (e) => {
    if (e.policy) return; // the session's policy answers it: nobody is asked
    for (const call of e.calls) addApproval(e.agent, call);
  },
  "approval.decided": (e) => removeApproval(e.agent, e.call_id),
  "question.asked": (e) => addQuestion(e),
  "question.answered": (e) => removeQuestion(e.question_id),
  "error": (e) => { $("post-error").textContent = e.message; },
  "session.finished": (e) => {
    setStatus(e.status);
    $("answer").textContent = e.answer;
    showMedia($("final-media"), e.media_urls);
    showInvented(e.invented_urls || []);
    $("final").hidden = false;
  },
  // Shown nowhere, but counted like every event (the server's paint counts them all).
  "round.ended": () => {},
  "tool.call": () => {},
  "tool.result": () => {},
  "guard.fired": () => {},
  "model.usage": () => {},
};

// Once the session has finished nothing reads its inbox and there is nothing to cancel: the
// follow-up form goes away (the server would answer 409) and a line says why.
function closeFollowUp(why) {
  $("post").hidden = true;
  for (const control of $("post").querySelectorAll("input, button")) control.disabled = true;
  $("post-closed").textContent = `${why}: follow-ups and cancelling are closed. `
    + "Start a new session from the list.";
  $("post-closed").hidden = false;
}

// EventSource gives up (CLOSED) on an answer other than a stream, e.g. the 404 of a session that
// is not there (any more): ask the state route why, and say so instead of "reconnecting…".
async function explainClosed() {
  const response = await fetch(`${base}/state`, { credentials: "same-origin" });
  if (response.status === 404) {
    setStatus("unknown");
    $("status").textContent = "no such session";
    $("connection").textContent = "";
    closeFollowUp((await response.json()).detail);
  } else {
    $("connection").textContent = `disconnected (HTTP ${response.status}); reload to retry`;
  }
}

function connect() {
  // After what the server painted; a reconnect's Last-Event-ID header then wins over the query.
  const after = CURSOR ? `?last_event_id=${encodeURIComponent(CURSOR)}` : "";
  const source = new EventSource(`${base}/events${after}`);
  source.onopen = () => { $("connection").textContent = "live"; };
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED) explainClosed();
    else $("connection").textContent = "reconnecting…";
  };
  for (const [type, handle] of Object.entries(handlers)) {
    source.addEventListener(type, (message) => {
      // A failed connection fires a plain "error" Event too (no data): not the bus's error event.
      if (!(message instanceof MessageEvent)) return;
      eventCount += 1;
      $("event-count").textContent = String(eventCount);
      handle(JSON.parse(message.data));
      if (type === "session.finished") {
        source.close();
        $("connection").textContent = "finished";
        closeFollowUp(`The session ended: ${JSON.parse(message.data).status}`);
      }
    });
  }
}

$("post").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = $("post-text");
  if (!input.value.trim()) return;
  const response = await postJSON(`${base}/messages`, { content: input.value });
  $("post-error").textContent = response.ok ? "" : (await response.json()).detail;
  if (response.ok) input.value = "";
});
$("cancel").addEventListener("click", async () => {
  const response = await postJSON(`${base}/cancel`, {});
  if (!response.ok) $("post-error").textContent = (await response.json()).detail;
});

for (const node of document.querySelectorAll(".approval")) wireApproval(node);
for (const node of document.querySelectorAll(".question")) wireQuestion(node);
// A finished session was painted whole, its follow-up closed: there is nothing to follow.
if (!TERMINAL.includes($("status").dataset.status)) connect();
