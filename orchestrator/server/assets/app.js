// The sessions list and the start form. Plain DOM, textContent only (no HTML from data).
"use strict";

async function getJSON(path) {
  const response = await fetch(path, { credentials: "same-origin" });
  if (!response.ok) throw new Error(`${path}: ${response.status}`);
  return response.json();
}

async function loadProfiles() {
  const box = document.getElementById("profiles");
  const { profiles } = await getJSON("/profiles");
  for (const profile of profiles) {
    const label = document.createElement("label");
    const input = document.createElement("input");
    input.type = "checkbox";
    input.name = "profile";
    input.value = profile.name;
    input.checked = true;
    label.append(input, ` ${profile.name} — ${profile.description}`);
    label.style.display = "block";
    box.append(label);
  }
}

async function loadSessions() {
  const list = document.getElementById("sessions");
  const { sessions } = await getJSON("/sessions");
  list.replaceChildren();
  if (!sessions.length) {
    const empty = document.createElement("li");
    empty.className = "muted";
    empty.textContent = "no sessions yet";
    list.append(empty);
  }
  for (const session of sessions) {
    const item = document.createElement("li");
    const link = document.createElement("a");
    link.href = `/sessions/${encodeURIComponent(session.id)}`;
    link.textContent = session.id;
    const badge = document.createElement("span");
    badge.className = "badge";
    badge.dataset.status = session.status;
    badge.textContent = session.status;
    item.append(link, " ", badge, ` ${session.task}`);
    list.append(item);
  }
}

async function start(event) {
  event.preventDefault();
  const error = document.getElementById("start-error");
  error.textContent = "";
  const form = event.target;
  const profiles = [...form.querySelectorAll("input[name=profile]:checked")].map((i) => i.value);
  const body = { task: form.task.value, approve: form.approve.value, profiles };
  const response = await fetch("/sessions", {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer = await response.json();
  if (!response.ok) {
    error.textContent = answer.detail || `error ${response.status}`;
    return;
  }
  window.location.assign(answer.page);
}

document.getElementById("start").addEventListener("submit", start);
loadProfiles().catch((e) => { document.getElementById("start-error").textContent = e.message; });
loadSessions().catch((e) => { document.getElementById("start-error").textContent = e.message; });
