// The inbox page's script (inbox.html). Plain JS, no build step, nothing fetched from elsewhere:
// it talks to the admin API like any client. Record data is only ever put into the page with
// textContent (never as markup), truncated; see docs/admin-api.md, "The inbox page".
"use strict";
(() => {
  // How many records the page keeps and shows: the newest. Everything older is dropped from the
  // page (not from the mock) and counted as skipped, so a load of 100k pushes a second cannot
  // make the page render more than this.
  const KEEP = 300;
  // What the page asks the event stream for at most (records a second): the rest is skipped by
  // the server, which then does not even encode them.
  const MAX_RATE = 1000;
  const TEXT_LIMIT = 400;       // characters of a field shown in a banner
  const PAYLOAD_LIMIT = 20000;  // characters of the pretty payload in the detail view
  const PUSH_TYPES = ["alert", "background", "location", "voip", "complication", "fileprovider", "mdm",
    "liveactivity", "pushtotalk", "widgets", "controls"];
  const $ = (id) => document.getElementById(id);
  const FILTERS = ["token", "topic", "pushType", "reason", "apnsId", "collapseId", "kind", "channelId"];

  const state = {
    token: sessionStorage.getItem("apns-mock-token") || "",
    reasons: new Map(),
    lastSeq: null,        // the newest seq received: where the stream resumes
    queue: [],            // events received, not yet rendered
    kept: [],             // rendered records, oldest first: {seq, el, group}
    groups: new Map(),    // thread or channel key -> group element
    records: new Map(),   // seq -> record, for the detail view
    skipped: 0,
    refused: [],
    goaways: [],
    paused: false,
    controller: null,
    generation: 0,
    framePending: false,
    lastStats: null,
    needToken: false,
  };

  // ---------- text helpers: data only ever reaches the page through textContent ----------
  function truncate(value, limit = TEXT_LIMIT) {
    const text = typeof value === "string" ? value : JSON.stringify(value);
    if (text === undefined) return "";
    return text.length > limit ? text.slice(0, limit) + "…" : text;
  }
  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = truncate(text);
    return node;
  }
  function chip(text, extra) { return el("span", "chip" + (extra ? " " + extra : ""), text); }
  function isObject(value) { return value !== null && typeof value === "object" && !Array.isArray(value); }
  function time(iso) {
    const date = new Date(iso);
    return isNaN(date) ? String(iso) : date.toLocaleTimeString([], { hour12: false }) + "." + String(date.getMilliseconds()).padStart(3, "0");
  }
  function shortToken(token) { return token && token.length > 16 ? token.slice(0, 8) + "…" + token.slice(-6) : (token || "no token"); }

  // ---------- admin API ----------
  async function api(method, path, body) {
    const headers = {};
    if (state.token) headers["Authorization"] = "Bearer " + state.token;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store" });
    if (response.status === 401) { askForToken(); throw new Error("the admin token is missing or wrong"); }
    const text = await response.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch (e) { json = null; }
    if (!response.ok) throw new Error((json && json.error) || (response.status + " " + response.statusText));
    return json;
  }
  function askForToken() {
    if (state.needToken) return;
    state.needToken = true;
    $("token-bar").hidden = false;
    $("token-message").textContent = state.token ? "That token was refused." : "";
    setStatus("waiting for the token", "error");
    $("token-input").focus();
  }
  $("token-save").addEventListener("click", () => {
    state.token = $("token-input").value.trim();
    sessionStorage.setItem("apns-mock-token", state.token);
    state.needToken = false;
    $("token-bar").hidden = true;
    start();
  });
  $("token-input").addEventListener("keydown", (event) => { if (event.key === "Enter") $("token-save").click(); });

  // ---------- reasons (GET /v1/reasons) ----------
  async function loadReasons() {
    const list = await api("GET", "/v1/reasons");
    state.reasons = new Map(list.reasons.map((r) => [r.reason, r]));
    const filterReason = $("f-reason"), faultReason = $("fault-reason");
    filterReason.replaceChildren(new Option("any", ""));
    faultReason.replaceChildren(new Option("normal answer", ""));
    for (const r of list.reasons) {
      filterReason.add(new Option(r.reason, r.reason));
      faultReason.add(new Option(r.status + " " + r.reason, r.reason));
    }
  }
  function fillPushTypes() {
    for (const id of ["f-pushType", "fault-pushType"]) {
      const select = $(id);
      select.replaceChildren(new Option("any", ""));
      for (const type of PUSH_TYPES) select.add(new Option(type, type));
    }
  }
  $("fault-reason").addEventListener("change", () => {
    const r = state.reasons.get($("fault-reason").value);
    $("fault-explanation").textContent = r ? r.explanation : "";
  });

  // ---------- statistics (GET /v1/stats) ----------
  async function pollStats() {
    try {
      const stats = await api("GET", "/v1/stats");
      $("count-accepted").textContent = stats.accepted.toLocaleString();
      $("count-rejected").textContent = stats.rejected.toLocaleString();
      $("count-connections").textContent = stats.connections.open.toLocaleString();
      if (stats.refusedStreams) $("count-refused").textContent = stats.refusedStreams.total.toLocaleString();
      if (stats.goaways) $("count-goaways").textContent = stats.goaways.total.toLocaleString();
      // The rate from the totals since start, which a reset or Clear does not move back.
      const total = stats.sinceStart ? stats.sinceStart.requests : stats.requests;
      const now = performance.now();
      if (state.lastStats) {
        const seconds = (now - state.lastStats.at) / 1000;
        const rate = seconds > 0 ? Math.max(0, total - state.lastStats.requests) / seconds : 0;
        $("count-rps").textContent = Math.round(rate).toLocaleString();
      }
      state.lastStats = { at: now, requests: total, lastSeq: stats.recording.lastSeq };
    } catch (error) { /* shown by the stream's status */ }
  }

  // ---------- the event stream (GET /v1/events, read with fetch so that it can carry the token) ----------
  function filterParameters() {
    const parameters = new URLSearchParams();
    for (const name of FILTERS) {
      const value = $("f-" + name).value.trim();
      if (value) parameters.set(name, value);
    }
    parameters.set("outcome", $("f-outcome").value);
    parameters.set("maxRate", String(MAX_RATE));
    return parameters;
  }
  function setStatus(text, kind) {
    const status = $("stream-status");
    status.textContent = text;
    status.className = kind || "";
  }

  async function connect() {
    if (state.controller) state.controller.abort();
    const generation = ++state.generation;
    const controller = new AbortController();
    state.controller = controller;
    // Resume after the newest record seen, but never replay more than the page keeps: what lies
    // further back is counted as skipped.
    let stats = null;
    try { stats = await api("GET", "/v1/stats"); } catch (error) { /* the stream says why */ }
    if (generation !== state.generation) return;
    const newest = stats ? stats.recording.lastSeq : 0;
    let resumeAfter = Math.max(0, newest - KEEP);
    if (state.lastSeq !== null) {
      if (state.lastSeq < resumeAfter) addSkipped(resumeAfter - state.lastSeq);
      resumeAfter = Math.max(resumeAfter, state.lastSeq);
    }
    const headers = { "Last-Event-ID": String(resumeAfter) };
    if (state.token) headers["Authorization"] = "Bearer " + state.token;
    setStatus("connecting");
    try {
      const response = await fetch("/v1/events?" + filterParameters(), { headers, signal: controller.signal, cache: "no-store" });
      if (response.status === 401) { askForToken(); return; }
      if (!response.ok) {
        let message = response.status + " " + response.statusText;
        try { message = (await response.json()).error || message; } catch (e) { /* keep the status */ }
        throw new Error(message);
      }
      $("filter-message").textContent = "";
      setStatus("live", "live");
      await readEvents(response.body.getReader(), generation);
      if (generation === state.generation && !state.paused) setStatus("reconnecting", "error");
    } catch (error) {
      if (controller.signal.aborted || generation !== state.generation) return;
      setStatus("disconnected: " + truncate(error.message, 80), "error");
    }
    if (generation === state.generation && !state.paused && !state.needToken) {
      setTimeout(() => { if (generation === state.generation && !state.paused) connect(); }, 2000);
    }
  }

  async function readEvents(reader, generation) {
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done || generation !== state.generation) return;
      buffer += decoder.decode(value, { stream: true });
      let start = 0, end;
      while ((end = buffer.indexOf("\n\n", start)) >= 0) {
        handleEvent(buffer.slice(start, end));
        start = end + 2;
      }
      buffer = buffer.slice(start);
    }
  }

  function handleEvent(block) {
    let id = null, type = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "id") id = value;
      else if (field === "event") type = value;
      else if (field === "data") data.push(value);
    }
    if (data.length === 0) return;
    if (type === "skipped") {
      try { addSkipped(JSON.parse(data.join("\n")).skipped || 0); } catch (e) { /* ignore a bad report */ }
      return;
    }
    if (type === "refused-streams") {
      try { addRefused(JSON.parse(data.join("\n"))); } catch (e) { /* ignore a bad report */ }
      return;
    }
    if (type === "goaway") {
      try { addGoAway(JSON.parse(data.join("\n"))); } catch (e) { /* ignore a bad report */ }
      return;
    }
    if (id !== null) state.lastSeq = Number(id);
    state.queue.push(data.join("\n"));
    // Only the newest KEEP can ever be shown: drop the rest unparsed.
    if (state.queue.length > 2 * KEEP) {
      const dropped = state.queue.length - KEEP;
      state.queue.splice(0, dropped);
      addSkipped(dropped);
    }
    scheduleFrame();
  }

  // Refused streams are no records: the page lists the latest bursts, by connection and cause.
  function addRefused(notice) {
    const cause = notice.cause === "beforeAuthentication"
      ? "before authentication (the client opened them before its first token was accepted; APNs allows " +
        notice.limit + " stream" + (notice.limit === 1 ? "" : "s") + " until then; server.streamsBeforeAuthentication raises it)"
      : notice.cause === "afterGoAway"
        ? "after the GOAWAY the mock sent (above its last stream id: not processed, the client may resend them)"
        : "over the connection's limit of " + notice.limit + " concurrent streams";
    const line = "Connection " + notice.connectionId + ": " + notice.count + " stream" + (notice.count === 1 ? "" : "s") +
      " refused " + cause + " (streams " + notice.firstStreamId + "\u2013" + notice.lastStreamId + ")";
    state.refused.unshift(line);
    state.refused.length = Math.min(state.refused.length, 5);
    const box = $("refused-notice");
    box.hidden = false;
    box.textContent = "";
    const title = document.createElement("b");
    title.textContent = "Refused streams (RST_STREAM REFUSED_STREAM): a client that does not retry them loses those pushes, and they are not records.";
    const list = document.createElement("ul");
    for (const text of state.refused) {
      const item = document.createElement("li");
      item.textContent = text;
      list.appendChild(item);
    }
    box.append(title, list);
    pollStats();
  }

  // GOAWAYs the mock sent are no records either: the latest few, with their cause.
  function addGoAway(notice) {
    const line = "Connection " + notice.connectionId + ": GOAWAY " + notice.code + " (" + notice.cause + ")" +
      ", last stream " + notice.lastStreamId + (notice.debugData ? ", " + notice.debugData : "") +
      " \u2014 streams above it were not processed";
    state.goaways.unshift(line);
    state.goaways.length = Math.min(state.goaways.length, 5);
    const box = $("goaway-notice");
    box.hidden = false;
    box.textContent = "";
    const title = document.createElement("b");
    title.textContent = "GOAWAY sent: clients resend the streams above the last stream id on a new connection.";
    const list = document.createElement("ul");
    for (const text of state.goaways) {
      const item = document.createElement("li");
      item.textContent = text;
      list.appendChild(item);
    }
    box.append(title, list);
    pollStats();
  }

  function addSkipped(count) {
    if (!count) return;
    state.skipped += count;
    $("count-skipped").textContent = state.skipped.toLocaleString();
    const notice = $("skip-notice");
    notice.hidden = false;
    notice.textContent = "Not every record is shown: " + state.skipped.toLocaleString() +
      " were skipped (the page keeps the newest " + KEEP + "; GET /v1/notifications has them all while the ring holds them).";
  }

  function scheduleFrame() {
    if (state.framePending) return;
    state.framePending = true;
    requestAnimationFrame(renderFrame);
  }

  // ---------- rendering: one batch per animation frame ----------
  function renderFrame() {
    state.framePending = false;
    if (state.queue.length === 0) return;
    let items = state.queue;
    state.queue = [];
    if (items.length > KEEP) {
      addSkipped(items.length - KEEP);
      items = items.slice(items.length - KEEP);
    }
    for (const data of items) {
      let record;
      try { record = JSON.parse(data); } catch (e) { continue; }
      insert(record);
    }
    while (state.kept.length > KEEP) {
      const old = state.kept.shift();
      removeRendered(old);
    }
    $("count-shown").textContent = state.kept.length.toLocaleString();
    $("feed-empty").hidden = state.kept.length > 0;
  }

  function removeRendered(entry) {
    entry.el.remove();
    state.records.delete(entry.seq);
    if (entry.group) {
      const items = entry.group.querySelector(".group-items");
      if (items.childElementCount === 0) {
        entry.group.remove();
        for (const [key, group] of state.groups) if (group === entry.group) state.groups.delete(key);
      } else {
        updateGroupHead(entry.group);
      }
    }
  }

  function aps(record) { return isObject(record.payload) && isObject(record.payload.aps) ? record.payload.aps : null; }

  function classify(record) {
    // Accepted as the query API counts it: an answer without a reason (200, or 201/204 for channels).
    if (record.status === null || record.reason) return "rejected";
    if (record.kind === "broadcast") return "broadcast";
    if (record.kind === "channel") return "channel";
    if (record.pushType === "liveactivity") return "activity";
    const a = aps(record);
    if (record.pushType === "background" || (a && a["content-available"] === 1 && a.alert === undefined)) return "quiet";
    if (record.pushType && record.pushType !== "alert") return "quiet";
    return "banner";
  }

  function groupKey(record, kind) {
    if ((kind === "broadcast" || kind === "channel") && record.channelId) {
      return { key: "channel\u0000" + record.channelId, label: "Channel", name: record.channelId };
    }
    const a = aps(record);
    if ((kind === "banner" || kind === "activity") && a && typeof a["thread-id"] === "string" && a["thread-id"]) {
      return { key: "thread\u0000" + (record.topic || "") + "\u0000" + a["thread-id"], label: "Thread", name: a["thread-id"] + " · " + (record.topic || "") };
    }
    return null;
  }

  let refreshTimer = null;
  function refreshListsSoon() {
    if (refreshTimer) return;
    refreshTimer = setTimeout(() => { refreshTimer = null; loadDevices(); loadFaults(); }, 300);
  }

  function insert(record) {
    // A fault fired or a device answered 410: the lists' counters changed.
    if (record.injected || record.status === 410) refreshListsSoon();
    const kind = classify(record);
    const node = render(record, kind);
    node.dataset.seq = String(record.seq);
    state.records.set(record.seq, record);
    const feed = $("feed");
    const grouping = groupKey(record, kind);
    let group = null;
    if (grouping) {
      group = state.groups.get(grouping.key);
      if (!group) {
        group = el("div", "group");
        group.dataset.kind = grouping.label.toLowerCase();
        const head = el("div", "group-head");
        head.append(el("b", null, grouping.label + " " + grouping.name), el("span", "group-count"));
        const toggle = el("button", null, "Show all");
        toggle.type = "button";
        toggle.addEventListener("click", (event) => {
          event.stopPropagation();
          group.classList.toggle("open");
          toggle.textContent = group.classList.contains("open") ? "Stack" : "Show all";
        });
        head.append(toggle);
        group.append(head, el("div", "group-items"));
        state.groups.set(grouping.key, group);
      }
      group.querySelector(".group-items").prepend(node);
      feed.prepend(group);
      updateGroupHead(group);
    } else {
      feed.prepend(node);
    }
    state.kept.push({ seq: record.seq, el: node, group });
  }

  function updateGroupHead(group) {
    const count = group.querySelector(".group-items").childElementCount;
    group.querySelector(".group-count").textContent = count + (count === 1 ? " notification" : " notifications");
  }

  function locText(key, args) {
    const list = Array.isArray(args) ? args.map((a) => truncate(a, 80)).join(", ") : "";
    return "⟨" + truncate(key, 120) + "⟩" + (list ? " " + list : "");
  }

  function alertParts(alert) {
    if (typeof alert === "string") return { body: alert };
    if (!isObject(alert)) return alert === undefined ? {} : { body: JSON.stringify(alert) };
    const pick = (plain, locKey, locArgs) => {
      if (alert[plain] !== undefined) return typeof alert[plain] === "string" ? alert[plain] : JSON.stringify(alert[plain]);
      if (alert[locKey] !== undefined) return locText(alert[locKey], alert[locArgs]);
      return undefined;
    };
    return {
      title: pick("title", "title-loc-key", "title-loc-args"),
      subtitle: pick("subtitle", "subtitle-loc-key", "subtitle-loc-args"),
      body: pick("body", "loc-key", "loc-args"),
    };
  }

  function soundText(sound) {
    if (typeof sound === "string") return sound;
    if (isObject(sound)) return (sound.name || "sound") + (sound.critical ? " (critical" + (sound.volume !== undefined ? ", volume " + sound.volume : "") + ")" : "");
    return JSON.stringify(sound);
  }

  // The app: the topic, or for channel requests and broadcasts the bundle in the path.
  function appOf(record) {
    if (record.topic) return record.topic;
    const match = /\/apps\/([^/?]+)/.exec((record.headers || {})[":path"] || "");
    return match ? match[1] : "no topic";
  }

  function lineOne(record, label) {
    const line = el("div", "line1");
    const topic = appOf(record);
    line.append(el("span", "icon", topic.replace(/^.*\./, "").slice(0, 1).toUpperCase() || "?"), el("span", "app", label || topic),
      el("span", "time", time(record.receivedAt)));
    return line;
  }

  function commonChips(record, chips) {
    for (const finding of record.lint || []) {
      const badge = chip(finding.code, "lint");
      badge.title = truncate(finding.message, 300);
      chips.append(badge);
    }
    if (record.injected) chips.append(chip("fault", "injected"));
    if (record.kind !== "broadcast" && record.kind !== "channel") chips.append(chip(shortToken(record.token)));
    chips.append(chip(record.environment));
  }

  function render(record, kind) {
    const node = el("article", "record " + kind);
    node.tabIndex = 0;
    node.addEventListener("click", () => showDetail(record.seq));
    node.addEventListener("keydown", (event) => { if (event.key === "Enter") showDetail(record.seq); });
    const a = aps(record) || {};
    const chips = el("div", "chips");
    if (kind === "rejected") {
      node.append(lineOne(record));
      const head = el("div");
      const status = record.status === null ? "no response" : String(record.status);
      head.append(el("span", "status", status + " "), el("span", "reason", record.reason || (record.action ? "fault: " + record.action : "")));
      node.append(head);
      const reason = state.reasons.get(record.reason);
      const explanation = reason ? reason.explanation
        : record.action ? "A fault rule's connection action replaced the answer (" + record.action + ")." : "";
      node.append(el("div", "explanation", explanation));
      if (record.pushType) chips.append(chip(record.pushType));
    } else if (kind === "quiet") {
      node.append(lineOne(record, (record.topic || "no topic") + " · " + (record.pushType || "background")));
      const keys = isObject(record.payload) ? Object.keys(record.payload).slice(0, 8).join(", ") : record.payloadEncoding || "empty";
      node.append(el("div", "body", "silent push · payload keys: " + keys));
    } else if (kind === "activity") {
      node.append(lineOne(record, (record.topic || "") + " · Live Activity"));
      node.append(el("div", "event", "Live Activity " + (typeof a.event === "string" ? a.event : "update")));
      const list = el("dl", "kv");
      const contentState = a["content-state"];
      if (isObject(contentState)) {
        for (const key of Object.keys(contentState).slice(0, 12)) list.append(el("dt", null, key), el("dd", null, contentState[key]));
      } else if (contentState !== undefined) {
        list.append(el("dt", null, "content-state"), el("dd", null, contentState));
      }
      for (const key of ["timestamp", "stale-date", "dismissal-date", "relevance-score"]) {
        if (a[key] !== undefined) list.append(el("dt", null, key), el("dd", null, a[key]));
      }
      node.append(list);
      const parts = alertParts(a.alert);
      if (parts.title || parts.body) node.append(el("div", "body", [parts.title, parts.body].filter(Boolean).join(" — ")));
    } else if (kind === "channel") {
      node.className = "record quiet channel";
      node.append(lineOne(record, appOf(record) + " · channel " + (record.operation || "")));
      node.append(el("div", "body", "channel " + (record.operation || "request") + (record.channelId ? " · " + record.channelId : "") +
        (record.requestId ? " · apns-request-id " + record.requestId : "")));
    } else if (kind === "broadcast") {
      node.append(lineOne(record, appOf(record) + " · broadcast"));
      const parts = alertParts(a.alert);
      if (parts.title) node.append(el("div", "title", parts.title));
      if (parts.body) node.append(el("div", "body", parts.body));
      if (a.event !== undefined) node.append(el("div", "event", "event: " + truncate(a.event, 40)));
      if (isObject(a["content-state"])) {
        const list = el("dl", "kv");
        for (const key of Object.keys(a["content-state"]).slice(0, 12)) list.append(el("dt", null, key), el("dd", null, a["content-state"][key]));
        node.append(list);
      }
    } else {
      node.append(lineOne(record));
      const parts = alertParts(a.alert);
      if (parts.title !== undefined) node.append(el("div", "title", parts.title));
      if (parts.subtitle !== undefined) node.append(el("div", "subtitle", parts.subtitle));
      if (parts.body !== undefined) node.append(el("div", "body", parts.body));
      if (parts.title === undefined && parts.body === undefined) node.append(el("div", "body", "(no alert text)"));
      if (a.badge !== undefined) chips.append(chip(String(a.badge), "badge"));
      if (a.sound !== undefined) chips.append(chip("♪ " + soundText(a.sound)));
      if (a["interruption-level"] !== undefined) chips.append(chip(a["interruption-level"], "level-" + String(a["interruption-level"]).replace(/[^a-z-]/g, "")));
      if (a["relevance-score"] !== undefined) chips.append(chip("relevance " + truncate(a["relevance-score"], 20)));
      if (a["thread-id"] !== undefined) chips.append(chip("thread " + truncate(a["thread-id"], 40)));
      if (a.category !== undefined) chips.append(chip("category " + truncate(a.category, 40)));
      if (a["mutable-content"] === 1) chips.append(chip("mutable"));
    }
    commonChips(record, chips);
    node.append(chips);
    return node;
  }

  // ---------- detail view ----------
  function table(rows) {
    const t = el("table");
    for (const [key, value] of rows) {
      const tr = el("tr");
      tr.append(el("td", null, key), el("td", null, value === null || value === undefined ? "—" : String(value)));
      t.append(tr);
    }
    return t;
  }

  function showDetail(seq) {
    const record = state.records.get(seq);
    if (!record) return;
    const detail = $("detail");
    detail.replaceChildren();
    const head = el("div", "head");
    head.append(el("h2", null, "Record " + record.seq));
    const close = el("button", null, "Close");
    close.id = "detail-close";
    close.addEventListener("click", hideDetail);
    head.append(close);
    detail.append(head);

    const actions = el("div", "actions");
    const download = el("button", null, "Download .apns");
    download.id = "detail-download";
    download.title = "For xcrun simctl push booted <file>";
    download.addEventListener("click", () => downloadAPNS(record.seq));
    actions.append(download);
    if (record.token) {
      for (const reason of ["Unregistered", "ExpiredToken"]) {
        const button = el("button", "danger", "Unregister token as " + reason);
        button.dataset.action = "unregister";
        button.dataset.reason = reason;
        button.addEventListener("click", () => unregister(record.token, reason, $("detail-message")));
        actions.append(button);
      }
    }
    detail.append(actions, Object.assign(el("div", "message"), { id: "detail-message" }));

    const reason = record.reason ? state.reasons.get(record.reason) : null;
    detail.append(el("h3", null, "Outcome"), table([
      ["status", record.status === null ? "no response (" + record.action + ")" : record.status],
      ["reason", record.reason], ["explanation", reason ? reason.explanation : null],
      ["timestamp", record.timestamp], ["injected by a fault", record.injected], ["action", record.action],
    ]));
    detail.append(el("h3", null, "Push"), table([
      ["apns-id", record.apnsId], ["apns-unique-id", record.uniqueId], ["token", record.token], ["topic", record.topic],
      ["push type", record.pushType], ["priority", record.priority], ["expiration", record.expiration],
      ["collapse id", record.collapseId], ["environment", record.environment],
      ["kind", record.kind], ["channel", record.channelId], ["operation", record.operation],
      ["apns-request-id", record.requestId],
    ]));
    const auth = record.auth || {};
    detail.append(el("h3", null, "Authentication"), table([
      ["method", auth.method], ["team", auth.teamId], ["key", auth.keyId], ["iat form", auth.iatForm],
    ]));
    detail.append(el("h3", null, "Connection and timing"), table([
      ["received at", record.receivedAt], ["connection", record.connectionId], ["stream", record.streamId],
      ["seq", record.seq],
    ]));
    if ((record.lint || []).length) {
      detail.append(el("h3", null, "Lint"), table(record.lint.map((f) => [f.code, f.message])));
    }
    const headers = Object.keys(record.headers || {}).sort().map((name) => [name, record.headers[name]]);
    detail.append(el("h3", null, "Headers"), table(headers));
    detail.append(el("h3", null, "Payload (" + record.payloadSize + " bytes, " + (record.payloadEncoding || "empty") + ")"));
    let pretty = record.payloadEncoding === "json" ? JSON.stringify(record.payload, null, 2) : String(record.payload ?? "");
    const pre = el("pre");
    pre.id = "detail-payload";
    pre.textContent = pretty.length > PAYLOAD_LIMIT ? pretty.slice(0, PAYLOAD_LIMIT) + "\n… (" + (pretty.length - PAYLOAD_LIMIT) + " more characters)" : pretty;
    detail.append(pre);
    $("detail-overlay").hidden = false;
  }

  function hideDetail() { $("detail-overlay").hidden = true; }
  $("detail-overlay").addEventListener("click", (event) => { if (event.target === $("detail-overlay")) hideDetail(); });
  document.addEventListener("keydown", (event) => { if (event.key === "Escape") hideDetail(); });

  async function downloadAPNS(seq) {
    const message = $("detail-message");
    try {
      const headers = {};
      if (state.token) headers["Authorization"] = "Bearer " + state.token;
      const response = await fetch("/v1/notifications/" + seq + ".apns", { headers, cache: "no-store" });
      if (!response.ok) {
        let text = response.status + " " + response.statusText;
        try { text = (await response.json()).error || text; } catch (e) { /* keep the status */ }
        throw new Error(text);
      }
      const url = URL.createObjectURL(await response.blob());
      const link = document.createElement("a");
      link.href = url;
      link.download = "apns-mock-" + seq + ".apns";
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
      message.className = "message good";
      message.textContent = "Saved apns-mock-" + seq + ".apns: xcrun simctl push booted apns-mock-" + seq + ".apns";
    } catch (error) {
      message.className = "message bad";
      message.textContent = truncate(error.message, 300);
    }
  }

  // ---------- devices ----------
  async function unregister(token, reason, message) {
    try {
      await api("POST", "/v1/devices/" + encodeURIComponent(token) + "/unregister", { reason });
      message.className = "message good";
      message.textContent = shortToken(token) + " now answers 410 " + reason + ".";
      loadDevices();
    } catch (error) {
      message.className = "message bad";
      message.textContent = truncate(error.message, 300);
    }
  }

  async function loadDevices() {
    const list = $("device-list");
    try {
      const registry = await api("GET", "/v1/devices");
      list.replaceChildren();
      if (registry.devices.length === 0) list.append(el("div", "empty", "No devices registered (policy " + registry.policy + ")."));
      for (const device of registry.devices.slice(0, 200)) {
        const item = el("div", "item device");
        item.dataset.token = device.token;
        item.append(el("span", "mono", shortToken(device.token)), chip(device.topic || "any app"), chip(device.environment || "any env"));
        if (device.reason) item.append(chip("410 " + device.reason, "lint"));
        for (const reason of ["Unregistered", "ExpiredToken"]) {
          const button = el("button", "danger", reason === "Unregistered" ? "Unregister" : "Expire");
          button.addEventListener("click", () => unregister(device.token, reason, $("device-message")));
          item.append(button);
        }
        const remove = el("button", null, "Remove");
        remove.addEventListener("click", async () => {
          try { await api("DELETE", "/v1/devices/" + encodeURIComponent(device.token)); loadDevices(); }
          catch (error) { $("device-message").className = "message bad"; $("device-message").textContent = truncate(error.message, 300); }
        });
        item.append(remove);
        list.append(item);
      }
      if (registry.devices.length > 200) list.append(el("div", "empty", (registry.devices.length - 200) + " more not shown."));
    } catch (error) { /* the token bar or the stream status says why */ }
  }
  $("device-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("device-token").value.trim();
    if (token) unregister(token, $("device-reason").value, $("device-message"));
  });

  // ---------- faults ----------
  async function loadFaults() {
    const list = $("fault-list");
    try {
      const faults = (await api("GET", "/v1/faults")).faults;
      list.replaceChildren();
      if (faults.length === 0) list.append(el("div", "empty", "No fault rules: every request gets the mock's own answer."));
      for (const fault of faults) {
        const item = el("div", "item fault");
        item.dataset.id = fault.id;
        const match = Object.entries(fault.match || {}).filter(([, v]) => v !== null && v !== undefined).map(([k, v]) => k + "=" + v).join(" ") || "every request";
        item.append(el("span", "mono", match));
        if (fault.respond) item.append(chip(fault.respond.status + " " + fault.respond.reason, "lint"));
        if (fault.action) item.append(chip(fault.action, "injected"));
        if (fault.maxConcurrentStreams !== undefined) item.append(chip("streams " + fault.maxConcurrentStreams));
        if (fault.durationMs !== undefined) item.append(chip("for " + fault.durationMs + " ms"));
        if (fault.delayMs) item.append(chip(fault.delayMs + " ms"));
        if (fault.probability !== 1) item.append(chip("p=" + fault.probability));
        item.append(chip(fault.remaining === null ? "always" : fault.remaining + " left"), chip(fault.applied + " applied"));
        const remove = el("button", null, "Remove");
        remove.addEventListener("click", async () => {
          try { await api("DELETE", "/v1/faults/" + encodeURIComponent(fault.id)); loadFaults(); }
          catch (error) { $("fault-message").className = "message bad"; $("fault-message").textContent = truncate(error.message, 300); }
        });
        item.append(remove);
        list.append(item);
      }
    } catch (error) { /* the token bar or the stream status says why */ }
  }
  // The streams and durationMs fields only show for the actions that read them.
  function showFaultParameters() {
    const action = $("fault-action").value;
    for (const node of document.querySelectorAll(".for-shrink-streams")) node.hidden = action !== "shrink-streams";
    for (const node of document.querySelectorAll(".for-duration")) node.hidden = action !== "shrink-streams" && action !== "ignore-pings";
  }
  $("fault-action").addEventListener("change", showFaultParameters);
  showFaultParameters();
  $("fault-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const rule = { match: {} };
    for (const name of ["token", "topic", "pushType"]) {
      const value = $("fault-" + name).value.trim();
      if (value) rule.match[name] = value;
    }
    if ($("fault-reason").value) rule.respond = { reason: $("fault-reason").value };
    if ($("fault-action").value) rule.action = $("fault-action").value;
    if (rule.action === "shrink-streams" && $("fault-maxConcurrentStreams").value) rule.maxConcurrentStreams = Number($("fault-maxConcurrentStreams").value);
    if ((rule.action === "shrink-streams" || rule.action === "ignore-pings") && $("fault-duration").value) rule.durationMs = Number($("fault-duration").value);
    if ($("fault-delay").value) rule.delayMs = Number($("fault-delay").value);
    if ($("fault-times").value) rule.times = Number($("fault-times").value);
    if ($("fault-probability").value) rule.probability = Number($("fault-probability").value);
    const message = $("fault-message");
    try {
      const added = await api("POST", "/v1/faults", rule);
      message.className = "message good";
      message.textContent = "Added fault " + added.id + ".";
      loadFaults();
    } catch (error) {
      message.className = "message bad";
      message.textContent = truncate(error.message, 300);
    }
  });

  // ---------- controls ----------
  $("filter-form").addEventListener("submit", (event) => { event.preventDefault(); resetFeed(); state.lastSeq = null; connect(); });
  $("filter-reset").addEventListener("click", () => {
    for (const name of FILTERS) $("f-" + name).value = "";
    $("f-outcome").value = "all";
    resetFeed(); state.lastSeq = null; connect();
  });
  $("pause").addEventListener("click", () => {
    state.paused = !state.paused;
    $("pause").textContent = state.paused ? "Resume" : "Pause";
    if (state.paused) {
      state.generation++;
      if (state.controller) state.controller.abort();
      setStatus("paused");
    } else {
      connect();
    }
  });
  $("clear").addEventListener("click", async () => {
    try {
      await api("DELETE", "/v1/notifications");
      resetFeed();
    } catch (error) { setStatus("clear failed: " + truncate(error.message, 80), "error"); }
  });

  function resetFeed() {
    state.queue = [];
    state.kept = [];
    state.groups.clear();
    state.records.clear();
    state.skipped = 0;
    $("feed").replaceChildren();
    $("feed-empty").hidden = false;
    $("count-shown").textContent = "0";
    $("count-skipped").textContent = "0";
    $("skip-notice").hidden = true;
    state.refused = [];
    $("refused-notice").hidden = true;
  }

  async function start() {
    try {
      await loadReasons();
    } catch (error) {
      if (!state.needToken) setStatus("cannot reach the admin API: " + truncate(error.message, 80), "error");
      return;
    }
    connect();
    pollStats();
    loadDevices();
    loadFaults();
  }

  fillPushTypes();
  setInterval(() => { if (!state.needToken) pollStats(); }, 1000);
  setInterval(() => { if (!state.needToken) { loadDevices(); loadFaults(); } }, 5000);
  start();
})();
