// The inbox's only script (vendored, no build step). Every value from a model,
// a tool or a person goes into the page through textContent, never as markup.
"use strict";

(function () {
  const meta = (name) => {
    const el = document.querySelector(`meta[name="${name}"]`);
    return el ? el.getAttribute("content") : "";
  };
  const base = meta("dex-base");
  const csrf = meta("dex-csrf");

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "class") node.className = value;
      else if (key.startsWith("data-")) node.setAttribute(key, value);
      else node[key] = value;
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  function sortKeys(value) {
    if (Array.isArray(value)) return value.map(sortKeys);
    if (value && typeof value === "object") {
      const sorted = {};
      for (const key of Object.keys(value).sort()) sorted[key] = sortKeys(value[key]);
      return sorted;
    }
    return value;
  }

  // The same text as the server's rendering (Python's json.dumps, indent 2, keys sorted).
  function pretty(value) {
    return JSON.stringify(sortKeys(value), null, 2);
  }

  function age(createdAt) {
    const seconds = Math.max(0, Math.floor((Date.now() - Date.parse(createdAt)) / 1000));
    if (Number.isNaN(seconds)) return "";
    if (seconds < 120) return `${seconds} s`;
    if (seconds < 7200) return `${Math.floor(seconds / 60)} min`;
    return `${Math.floor(seconds / 3600)} h`;
  }

  async function post(url, body) {
    const response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify(body || {}),
    });
    const data = await response.json().catch(() => ({}));
    if (!response.ok) {
      const message = data.error ? data.error.message : `HTTP ${response.status}`;
      const error = new Error(message);
      error.code = data.error ? data.error.code : "";
      error.field = data.error && typeof data.error.field === "string" ? data.error.field : null;
      throw error;
    }
    return data;
  }

  const EXPIRED = "expired: no approval before the deadline";
  const CANCELLED = "the turn was cancelled";

  function usd(value) {
    return typeof value === "number" && Number.isFinite(value) ? value.toFixed(4) : "?";
  }

  // A spend-limit interrupt in a line (its `arguments`: `spent_usd`, `spend_limit_usd`).
  function budgetText(args) {
    const a = args || {};
    return `spend limit reached: ${usd(a.spent_usd)} of ${usd(a.spend_limit_usd)} USD spent`;
  }

  // An answer no worker took yet (`recorded`: recorded in the session's history,
  // it applies when a worker starts), as the server's `recorded_text` says it.
  const RECORDED = "recorded; applies when a worker starts";
  function recordedText(r, kind) {
    const by = r.resolved_by ? ` by ${r.resolved_by}` : "";
    const limit = typeof r.new_spend_limit === "number" ? ` with a new spend limit of ${usd(r.new_spend_limit)} USD` : "";
    const way = r.approved ? `approved${by}${limit}` : `${kind === "budget" ? "declined" : "rejected"}${by}`;
    const why = !r.approved && r.rejection_message ? `: ${r.rejection_message}` : "";
    return `${way} (${RECORDED})${why}`;
  }

  // A recorded answer in place of a row's or a card's forms (nobody answers it again).
  function showRecorded(container, cell, r, kind) {
    cell.replaceChildren(el("span", { class: `decided-by recorded ${r.approved ? "approved" : "rejected"}` }, recordedText(r, kind)));
    container.classList.add("recorded");
  }

  // The budget form's new limit, or why it cannot be sent (checked before sending).
  function parseLimit(text, spent) {
    const value = Number(String(text).trim());
    if (!String(text).trim() || !Number.isFinite(value) || value <= 0) {
      return { error: `Type a number of USD above ${usd(spent)}; nothing was sent.` };
    }
    return { value };
  }

  // The edited input as typed, or why it cannot be sent (checked before sending).
  function parseEdit(text) {
    let value;
    try {
      value = JSON.parse(text);
    } catch (err) {
      return { error: `Not JSON: ${err.message}. Fix it and approve again; nothing was sent.` };
    }
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      return { error: "The input must be a JSON object ({...}). Fix it and approve again; nothing was sent." };
    }
    return { value };
  }

  function showFormError(form, text) {
    let p = form.querySelector("p.error");
    if (!p) {
      p = el("p", { class: "error edit-error", role: "alert" });
      form.append(p);
    }
    p.textContent = text;
  }

  // A long input is not in the event: read it from the session's snapshot.
  async function fillLongInput(textarea, sessionId, interruptId) {
    if (textarea.value) return;
    try {
      const response = await fetch(`${base}/api/sessions/${encodeURIComponent(sessionId)}?turns=0`, { credentials: "same-origin" });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const view = await response.json();
      const found = view.snapshot.pending_interrupts.find((i) => i.interrupt_id === interruptId);
      if (found && !textarea.value) textarea.value = pretty(found.arguments);
    } catch (err) {
      textarea.placeholder = `Cannot read the input: ${err.message}`;
    }
  }

  function approvalPath(sessionId, interruptId, decision) {
    return `${base}/api/sessions/${encodeURIComponent(sessionId)}/approvals/` +
      `${encodeURIComponent(interruptId)}/${decision}`;
  }

  // Approve/reject (or edit & approve) in place: the forms post without a script too.
  function decideInPlace(container, sessionId, interruptId) {
    for (const form of container.querySelectorAll("form.decision")) {
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        const decision = form.getAttribute("data-decision");
        const cell = form.closest(".decide") || form.parentElement;
        let body = {};
        if (decision === "reject") {
          const input = form.querySelector('input[name="message"]');
          body = { message: input && input.value ? input.value : null };
        } else if (decision === "edit") {
          const edit = parseEdit(form.querySelector('textarea[name="edited_input"]').value);
          if (edit.error) return showFormError(form, edit.error);
          body = { edited_input: edit.value };
        } else if (decision === "budget") {
          const spent = Number(form.getAttribute("data-spent"));
          const limit = parseLimit(form.querySelector('input[name="new_spend_limit"]').value, spent);
          if (limit.error) return showFormError(form, limit.error);
          body = { new_spend_limit: limit.value };
        }
        const path = approvalPath(sessionId, interruptId, decision === "reject" ? "reject" : "approve");
        try {
          const result = await post(path, body);
          if (result.recorded) {
            // No worker took it: recorded, it applies when one starts.
            const answer = { approved: result.approved, resolved_by: result.by, rejection_message: body.message || null, new_spend_limit: decision === "budget" ? body.new_spend_limit : null };
            // Still pending (the list shows it until a worker applies it), now answered.
            showRecorded(container, cell, answer, container.getAttribute("data-kind"));
            return;
          }
          const verb = result.approved ? "approved" : "rejected";
          let how = decision === "edit" ? "approved with an edited input" : verb;
          if (decision === "budget") how = `limit raised to ${usd(body.new_spend_limit)} USD`;
          else if (container.getAttribute("data-kind") === "budget" && !result.approved) how = "declined";
          cell.replaceChildren(el("span", { class: `decided-by ${verb}` }, `${how} by ${result.by}`));
          container.classList.add("decided");
        } catch (err) {
          if (decision === "edit") {
            // Refused (the field is named): the call still waits, the text stays to fix.
            const field = err.field ? ` (field ${err.field})` : "";
            showFormError(form, `Refused${field}: ${err.message}`);
          } else if (decision === "budget") {
            // Refused (too low, say): the interrupt still waits, the number stays to fix.
            showFormError(form, `Refused: ${err.message}`);
          } else {
            cell.append(el("p", { class: "error" }, err.message));
          }
        }
      });
    }
    for (const details of container.querySelectorAll("details.edit[data-long-input]")) {
      details.addEventListener("toggle", () => {
        if (details.open) fillLongInput(details.querySelector("textarea"), sessionId, interruptId);
      });
    }
  }

  // A spend limit reached: a new limit (a number field) to approve with, or decline.
  function budgetForms(sessionId, interruptId, nextPage, args) {
    const action = (d) => `${base}/sessions/${encodeURIComponent(sessionId)}/approvals/${encodeURIComponent(interruptId)}/${d}`;
    const hidden = (name, value) => el("input", { type: "hidden", name, value });
    const limit = el("input", { type: "number", name: "new_spend_limit", step: "any", inputMode: "decimal" });
    limit.setAttribute("aria-label", "new limit (USD)");
    const spent = args && typeof args.spent_usd === "number" ? String(args.spent_usd) : "";
    return [
      el("form", { method: "post", action: action("approve"), class: "decision budget-form", "data-decision": "budget", "data-spent": spent },
        hidden("csrf_token", csrf), hidden("next", nextPage),
        el("label", {}, "new limit (USD) ", limit),
        el("button", { type: "submit", class: "approve" }, "Raise the limit")),
      el("form", { method: "post", action: action("reject"), class: "decision", "data-decision": "reject" },
        hidden("csrf_token", csrf), hidden("next", nextPage),
        el("input", { type: "text", name: "message", placeholder: "why (kept in the turn's error)" }),
        el("button", { type: "submit", class: "reject" }, "Decline")),
    ];
  }

  // `args`: the call's input, to start the edit from (null when long: read on opening).
  function decisionForms(sessionId, interruptId, nextPage, args, kind) {
    if (kind === "budget") return budgetForms(sessionId, interruptId, nextPage, args);
    const action = (d) => `${base}/sessions/${encodeURIComponent(sessionId)}/approvals/${encodeURIComponent(interruptId)}/${d}`;
    const hidden = (name, value) => el("input", { type: "hidden", name, value });
    const textarea = el("textarea", { name: "edited_input", rows: 6, spellcheck: false, value: args ? pretty(args) : "" });
    textarea.setAttribute("aria-label", "edited input (JSON)");
    const edit = el("details", { class: "edit" },
      el("summary", {}, "Edit & approve"),
      el("form", { method: "post", action: action("approve"), class: "decision edit-form", "data-decision": "edit" },
        hidden("csrf_token", csrf), hidden("next", nextPage), textarea,
        el("button", { type: "submit", class: "approve-edited" }, "Approve with this input")));
    if (!args) edit.setAttribute("data-long-input", "yes");
    return [
      el("form", { method: "post", action: action("approve"), class: "decision", "data-decision": "approve" },
        hidden("csrf_token", csrf), hidden("next", nextPage),
        el("button", { type: "submit", class: "approve" }, "Approve")),
      edit,
      el("form", { method: "post", action: action("reject"), class: "decision", "data-decision": "reject" },
        hidden("csrf_token", csrf), hidden("next", nextPage),
        el("input", { type: "text", name: "message", placeholder: "why (the agent reads it)" }),
        el("button", { type: "submit", class: "reject" }, "Reject")),
    ];
  }

  // ---- the inbox: every pending approval, polled -------------------------------

  function inbox() {
    const table = document.getElementById("approvals");
    const body = table.querySelector("tbody");
    const mayApprove = table.getAttribute("data-may-approve") === "yes";
    for (const row of body.querySelectorAll("tr.approval")) {
      decideInPlace(row, row.getAttribute("data-session-id"), row.getAttribute("data-interrupt-id"));
    }

    function row(a) {
      const budget = a.kind === "budget";
      const link = el("a", { href: `${base}/sessions/${encodeURIComponent(a.session_id)}` }, a.session_id);
      const effect = budget
        ? el("td", {}, el("span", { class: "effect effect-budget" }, "budget"))
        : el("td", {}, el("span", { class: `effect effect-${a.effect}` }, a.effect));
      if (a.at_least_once) effect.append(" ", el("span", { class: "warn" }, "at least once"));
      const decide = el("td", { class: "decide" });
      if (a.recorded) decide.append(el("span", { class: `decided-by recorded ${a.recorded.approved ? "approved" : "rejected"}` }, recordedText(a.recorded, a.kind)));
      else if (mayApprove) decide.append(...decisionForms(a.session_id, a.interrupt_id, "inbox", a.arguments, a.kind));
      else decide.append(el("span", { class: "hint" }, "needs the approve role"));
      const tr = el("tr", { class: (budget ? "approval budget" : "approval") + (a.recorded ? " recorded" : ""), "data-interrupt-id": a.interrupt_id, "data-session-id": a.session_id, "data-kind": a.kind || "tool_call" },
        el("td", {}, link),
        el("td", { class: "tool" }, budget ? "spend limit" : a.tool_name),
        effect,
        el("td", {}, budget ? el("p", { class: "budget" }, budgetText(a.arguments)) : el("pre", { class: "input" }, pretty(a.arguments))),
        el("td", { class: "reason" }, a.reason),
        el("td", { class: "age", "data-created": a.created_at }, age(a.created_at)),
        el("td", { class: "deadline" }, a.deadline || "none"),
        decide);
      decideInPlace(tr, a.session_id, a.interrupt_id);
      return tr;
    }

    async function refresh() {
      try {
        const response = await fetch(`${base}/api/approvals?limit=500`, { credentials: "same-origin" });
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        const page = await response.json();
        const wanted = new Set(page.approvals.map((a) => a.interrupt_id));
        for (const existing of body.querySelectorAll("tr.approval")) {
          const id = existing.getAttribute("data-interrupt-id");
          if (!wanted.has(id) && !existing.classList.contains("decided")) existing.remove();
        }
        for (const a of page.approvals) {
          const found = body.querySelector(`tr[data-interrupt-id="${CSS.escape(a.interrupt_id)}"]`);
          if (!found) body.append(row(a));
          else if (a.recorded && !found.classList.contains("recorded") && !found.classList.contains("decided")) {
            // Answered elsewhere while no worker ran: its forms give way to the answer.
            showRecorded(found, found.querySelector("td.decide"), a.recorded, a.kind);
          }
        }
        for (const cell of body.querySelectorAll("td.age")) cell.textContent = age(cell.getAttribute("data-created"));
        const waiting = body.querySelectorAll("tr.approval:not(.decided)").length;
        document.getElementById("approval-count").textContent = String(waiting);
        document.getElementById("no-approvals").hidden = waiting > 0;
        document.getElementById("live-note").textContent = "This list updates by itself.";
      } catch (err) {
        document.getElementById("live-note").textContent = `Cannot refresh: ${err.message}`;
      }
    }
    setInterval(refresh, 1000);
  }

  // ---- a session: the conversation, live --------------------------------------

  function session() {
    const conversation = document.getElementById("conversation");
    const sessionId = conversation.getAttribute("data-session-id");
    const after = conversation.getAttribute("data-after");
    const mayApprove = conversation.getAttribute("data-may-approve") === "yes";
    const status = document.getElementById("session-status");
    const stop = document.getElementById("stop-turn");
    const BUSY = new Set(["running", "waiting_for_approval", "budget_reached"]);
    // Answers no worker took yet, by interrupt ID (the server's text): shown on their cards.
    const recorded = new Map();
    for (const li of document.querySelectorAll("#recorded-answers li")) {
      recorded.set(li.getAttribute("data-interrupt-id"), { text: li.textContent, approved: li.getAttribute("data-approved") === "yes" });
    }

    function recordedAnswer(card, id) {
      const answer = recorded.get(id);
      if (!answer) return false;
      card.querySelector(".decide").replaceChildren(
        el("span", { class: `decided-by recorded ${answer.approved ? "approved" : "rejected"}` }, answer.text));
      for (const hint of card.querySelectorAll("p.hint")) hint.remove();
      card.classList.add("recorded");
      return true;
    }

    function setStatus(value) {
      status.textContent = value;
      status.className = `status status-${value}`;
      if (stop) stop.hidden = !BUSY.has(value);
    }

    // The header's turn count, as the server's page says it: a turn's events
    // (`turn-N`) mean the session has at least N turns.
    const turnCount = document.getElementById("turn-count");
    function countTurn(turnId) {
      const found = /-(\d+)$/.exec(turnId || "");
      if (!turnCount || !found) return;
      const n = Number(found[1]);
      if (n <= Number(turnCount.getAttribute("data-count"))) return;
      turnCount.setAttribute("data-count", String(n));
      turnCount.textContent = `${n} turn${n === 1 ? "" : "s"}`;
    }

    function stopDone() {
      if (!stop) return;
      const button = stop.querySelector("button");
      button.disabled = false;
      button.textContent = "Stop";
      for (const p of stop.querySelectorAll("p")) p.remove();
    }

    function turn(turnId) {
      let article = conversation.querySelector(`article[data-turn-id="${CSS.escape(turnId)}"]`);
      if (!article) {
        article = el("article", { class: "turn live", "data-turn-id": turnId },
          el("h2", {}, turnId, " ", el("span", { class: "status status-running" }, "running")),
          el("ul", { class: "calls" }),
          el("div", { class: "answer" }));
        conversation.append(article);
      }
      return article;
    }

    function turnStatus(article, value) {
      const badge = article.querySelector("h2 .status");
      badge.textContent = value;
      badge.className = `status status-${value}`;
    }

    // The model API failed a request and the runner asks again (`model_retry`): one line
    // per turn, the latest retry, gone once the model answers or the turn ends.
    function modelRetry(article, e) {
      const d = e.data;
      const what = d.error_status == null
        ? "the model API could not be reached"
        : `the model API answered HTTP ${d.error_status} (${d.error})`;
      const text = `↻ ${what}; asking again in ${(d.retry_in_ms / 1000).toFixed(1)} s (retry ${d.attempt} of ${d.max_retries})`;
      const note = article.querySelector("p.model-retry");
      if (note) note.textContent = text;
      else article.querySelector(".answer").before(el("p", { class: "model-retry" }, text));
    }

    function retried(article) {
      const note = article && article.querySelector("p.model-retry");
      if (note) note.remove();
    }

    function attemptText(article, e) {
      const answer = article.querySelector(".answer");
      const key = `${e.step_execution_id}#${e.attempt}`;
      let span = answer.querySelector(`span[data-attempt-key="${CSS.escape(key)}"]`);
      if (!span) {
        span = el("span", { class: "attempt", "data-attempt-key": key, "data-step": e.step_execution_id, "data-attempt": String(e.attempt) });
        answer.append(span);
      }
      return span;
    }

    // Calls approved with an edited input, by tool call ID: who edited, what the model asked.
    const edits = new Map();

    function inputText(data, name) {
      return data[`${name}_ref`] && !data[name] ? "(a long input: read it from the session's JSON)" : pretty(data[name] || {});
    }

    function call(article, e) {
      const id = e.data.tool_call_id;
      let li = article.querySelector(`li[data-tool-call-id="${CSS.escape(id)}"]`);
      if (!li) {
        li = el("li", { class: "call", "data-tool-call-id": id, "data-step": e.step_execution_id, "data-attempt": String(e.attempt) },
          el("span", { class: "tool" }, e.data.tool_name || ""), " ",
          el("span", { class: "status status-running" }, "running"));
        const edit = edits.get(id);
        if (edit) {
          li.classList.add("edited");
          li.append(
            el("p", { class: "edit-note" }, "Edited by ", el("span", { class: "edited-by" }, edit.by), " before approval; it runs with:"),
            el("pre", { class: "input edited" }, e.data.arguments_ref ? "(a long input: read it from the session's JSON)" : pretty(e.data.arguments || {})),
            el("p", { class: "edit-note" }, "The model asked for:"),
            el("pre", { class: "input original" }, edit.original));
        } else {
          li.append(el("pre", { class: "input" }, pretty(e.data.arguments || {})));
        }
        article.querySelector(".calls").append(li);
      }
      return li;
    }

    function drop(marker) {
      // A newer attempt of the step started: what lower attempts showed is void.
      for (const node of conversation.querySelectorAll(`[data-step="${CSS.escape(marker.step_execution_id)}"]`)) {
        if (Number(node.getAttribute("data-attempt")) < marker.attempt) node.remove();
      }
    }

    function approval(article, e) {
      const id = e.data.interrupt_id;
      if (article.querySelector(`[data-interrupt-id="${CSS.escape(id)}"]`)) return;
      const forms = el("div", { class: "decide" });
      if (e.data.kind === "budget") {
        if (mayApprove) forms.append(...budgetForms(sessionId, id, "session", e.data.arguments || {}));
        const card = el("div", { class: "approval-card budget", "data-interrupt-id": id, "data-kind": "budget" },
          el("p", { class: "budget" }, budgetText(e.data.arguments)),
          el("p", { class: "hint" }, "Raise the limit to go on, or decline to end the turn."),
          forms);
        if (!recordedAnswer(card, id)) decideInPlace(card, sessionId, id);
        article.querySelector(".calls").after(card);
        return;
      }
      const long = Boolean(e.data.arguments_ref);
      if (mayApprove) forms.append(...decisionForms(sessionId, id, "session", long ? null : (e.data.arguments || {})));
      const input = el("pre", { class: "input" }, long ? "(loading the long input…)" : pretty(e.data.arguments || {}));
      const card = el("div", { class: "approval-card", "data-interrupt-id": id, "data-tool-call-id": e.data.tool_call_id || "" },
        el("p", {}, "Approve ", el("span", { class: "tool" }, e.data.tool_name || ""), " (",
          el("span", { class: `effect effect-${e.data.effect}` }, e.data.effect || ""), ")?"),
        input,
        forms);
      if (!recordedAnswer(card, id)) decideInPlace(card, sessionId, id);
      article.querySelector(".calls").after(card);
      if (long) showLongInput(card, input, id);
    }

    // A long input is not in its event: nobody approves what the card does not
    // show, so Approve and Edit & approve wait until the input is read and shown.
    async function showLongInput(card, input, interruptId) {
      const gated = [...card.querySelectorAll("form.decision:not([data-decision=reject]) button, details.edit textarea")];
      for (const node of gated) node.disabled = true;
      card.setAttribute("data-input", "loading");
      const deadline = Date.now() + 30_000;
      let why = "it is no longer pending";
      for (;;) {
        if (card.classList.contains("decided")) return; // answered elsewhere meanwhile
        try {
          const response = await fetch(`${base}/api/sessions/${encodeURIComponent(sessionId)}?turns=0`, { credentials: "same-origin" });
          if (!response.ok) throw new Error(`HTTP ${response.status}`);
          const view = await response.json();
          const found = view.snapshot.pending_interrupts.find((i) => i.interrupt_id === interruptId);
          if (found) {
            input.textContent = pretty(found.arguments);
            const textarea = card.querySelector('textarea[name="edited_input"]');
            if (textarea && !textarea.value) textarea.value = pretty(found.arguments);
            for (const node of gated) node.disabled = false;
            card.setAttribute("data-input", "shown");
            return;
          }
        } catch (err) {
          why = err.message;
        }
        // The event can come before the snapshot that holds it: ask again, a while.
        if (Date.now() > deadline) break;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      card.setAttribute("data-input", "failed");
      input.textContent = `(cannot read the long input: ${why}; reload the page to see it before approving)`;
    }

    function resolved(article, e) {
      const card = article.querySelector(`.approval-card[data-interrupt-id="${CSS.escape(e.data.interrupt_id)}"]`);
      if (!card) return;
      const edited = Boolean(e.data.approved && (e.data.edited_arguments || e.data.edited_arguments_ref));
      const who = e.data.resolved_by ? ` by ${e.data.resolved_by}` : "";
      const budget = card.getAttribute("data-kind") === "budget";
      const message = e.data.rejection_message || "";
      let verb = e.data.approved ? "approved" : "rejected";
      let text = `${verb}${who}${message ? `: ${message}` : ""}`;
      if (e.data.expired) {
        verb = "expired"; text = EXPIRED;
      } else if (e.data.cancelled || (!e.data.approved && message.startsWith(CANCELLED))) {
        verb = "cancelled"; text = message;
      } else if (budget && e.data.approved) {
        text = `limit raised to ${usd(e.data.new_spend_limit)} USD${who}`;
      } else if (budget) {
        text = `declined${who}${message ? `: ${message}` : ""}`;
      } else if (edited) {
        text = `approved with an edited input${who}`;
        const callId = card.getAttribute("data-tool-call-id");
        if (callId) edits.set(callId, { by: e.data.edited_by || e.data.resolved_by || "a person", original: inputText(e.data, "original_arguments") });
      }
      const decide = card.querySelector(".decide");
      decide.replaceChildren(el("span", { class: `decided-by ${verb}` }, text));
      if (edited) {
        decide.append(
          el("p", { class: "edit-note" }, "It runs with:"),
          el("pre", { class: "input edited" }, inputText(e.data, "edited_arguments")),
          el("p", { class: "edit-note" }, "The model asked for:"),
          el("pre", { class: "input original" }, inputText(e.data, "original_arguments")));
      }
      card.classList.add("decided");
    }

    function handle(e) {
      if (e.type === "attempt_superseded") return drop(e);
      if (e.superseded) return; // a newer attempt of its step already streams
      const article = e.turn_id ? turn(e.turn_id) : null;
      countTurn(e.turn_id);
      switch (e.type) {
        case "turn_started":
          turnStatus(article, "running"); setStatus("running"); break;
        case "model_retry":
          modelRetry(article, e); break;
        case "text_delta":
          retried(article);
          attemptText(article, e).append(document.createTextNode(e.data.text || "")); break;
        case "tool_call_started":
          call(article, e); break;
        case "tool_call_finished": {
          const li = call(article, e);
          const badge = li.querySelector(".status");
          badge.textContent = e.data.status; badge.className = `status status-${e.data.status}`;
          if (e.data.status === "expired") {
            // Nobody refused it: its approval deadline passed.
            li.append(" ", el("span", { class: "expired-note" }, EXPIRED));
            break;
          }
          const text = e.data.output || e.data.rejection_message || e.data.error || "";
          if (text) li.append(el("pre", { class: "output" }, text));
          break;
        }
        case "interrupt_created":
          approval(article, e); turnStatus(article, "waiting_for_approval");
          setStatus(e.data.kind === "budget" ? "budget_reached" : "waiting_for_approval"); break;
        case "interrupt_resolved":
          resolved(article, e); turnStatus(article, "running"); setStatus("running"); break;
        case "turn_completed":
          retried(article); turnStatus(article, "completed"); setStatus("idle"); break;
        case "turn_failed":
          retried(article); turnStatus(article, "failed"); setStatus("idle");
          article.append(el("p", { class: "error" }, e.data.error || "the turn failed")); break;
        case "turn_cancelled": {
          retried(article); turnStatus(article, "cancelled"); setStatus("idle"); stopDone();
          const by = e.data.cancelled_by ? ` by ${e.data.cancelled_by}` : "";
          const why = e.data.reason ? `: ${e.data.reason}` : "";
          article.append(el("p", { class: "cancelled" }, `stopped${by}${why}`));
          break;
        }
        case "session_ended":
          setStatus("ended"); break;
        default:
          break;
      }
    }

    for (const card of conversation.querySelectorAll(".approval-card")) {
      decideInPlace(card, sessionId, card.getAttribute("data-interrupt-id"));
    }
    const source = new EventSource(`${base}/api/sessions/${encodeURIComponent(sessionId)}/events?after=${encodeURIComponent(after)}`);
    source.onmessage = (message) => handle(JSON.parse(message.data));

    if (stop) {
      stop.addEventListener("submit", async (event) => {
        event.preventDefault();
        const button = stop.querySelector("button");
        const reason = stop.querySelector('input[name="reason"]');
        for (const p of stop.querySelectorAll("p")) p.remove();
        button.disabled = true;
        try {
          const result = await post(`${base}/api/sessions/${encodeURIComponent(sessionId)}/cancel`, { reason: reason && reason.value ? reason.value : "" });
          if (result.cancelled) {
            button.textContent = "Stopping…";
          } else {
            button.disabled = false;
            stop.append(el("p", { class: "hint" }, "Nothing to stop: no turn runs."));
          }
        } catch (err) {
          button.disabled = false;
          stop.append(el("p", { class: "error" }, err.message));
        }
      });
    }

    const form = document.getElementById("send-message");
    if (form) {
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        const text = form.querySelector("textarea").value;
        try {
          await post(`${base}/api/sessions/${encodeURIComponent(sessionId)}/messages`, { text });
          form.querySelector("textarea").value = "";
        } catch (err) {
          form.append(el("p", { class: "error" }, err.message));
        }
      });
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    const page = document.body.getAttribute("data-page");
    if (page === "inbox") inbox();
    if (page === "session") session();
  });
})();
