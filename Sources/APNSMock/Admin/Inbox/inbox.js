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
  // Older records the page loads on request (Load older), a page at a time, and at most in all;
  // with a filter, how many seqs one query looks through.
  const OLDER_PAGE = 100;
  const OLDER_MAX = 1000;
  const OLDER_SCAN = 1000;
  // The rate chart's window, in seconds.
  const CHART_SECONDS = 300;
  const TEXT_LIMIT = 400;       // characters of a field shown in a banner
  const PAYLOAD_LIMIT = 20000;  // characters of the pretty payload in the detail view
  const PUSH_TYPES = ["alert", "background", "location", "voip", "complication", "fileprovider", "mdm",
    "liveactivity", "pushtotalk", "widgets", "controls"];
  const $ = (id) => document.getElementById(id);
  const FILTERS = ["token", "topic", "pushType", "reason", "apnsId", "collapseId", "kind", "channelId"];
  // The team the page is for: ?team= in its own address; empty, every team (docs/teams.md). Every
  // call the page makes to the admin API carries it as the `team` query parameter, except the two
  // that are the whole mock's: the reasons and the list of teams.
  const TEAM = new URLSearchParams(location.search).get("team") || "";
  function scoped(path) {
    return TEAM ? path + (path.includes("?") ? "&" : "?") + "team=" + encodeURIComponent(TEAM) : path;
  }

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
    needToken: false,
    // Statistics: the latest answer applied; a ticket per request so that a late answer (sent
    // before a newer one, or before a Clear) is never applied over a newer one.
    stats: null,
    statsTicket: 0,
    statsApplied: 0,
    statsTimer: null,
    clearing: false,
    // What /v1/stats subtracts from the totals since start (sinceStart.requests - requests): it
    // changes exactly when the counts and the records start again (Clear, POST /v1/reset).
    baseline: null,
    basis: null,
    // Records loaded with "Load older", newest first, below the live feed.
    older: [],            // {seq, el}
    olderRecords: new Map(),
    olderScanned: null,   // the lowest seq a filtered search for older records looked at
    olderExhausted: false,
    loadingOlder: false,
    feedGeneration: 0,
    // The rate chart: the previous sample's totals and the samples of the last CHART_SECONDS.
    chart: { prev: null, samples: [], colors: new Map(), now: undefined },
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
  async function api(method, path, body, { unscoped = false } = {}) {
    const headers = {};
    if (state.token) headers["Authorization"] = "Bearer " + state.token;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(unscoped ? path : scoped(path), { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store" });
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
    const list = await api("GET", "/v1/reasons", undefined, { unscoped: true });
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

  // ---------- the team (GET /v1/teams) ----------
  // The header names the team the page is for; the picker lists the mock's teams, and choosing one
  // opens the page again for it (or, "all teams", without ?team=). A mock without teams (an older
  // one) answers 404 there: the picker stays hidden.
  function showTeam() {
    $("team-name").textContent = truncate(TEAM || "all teams", 40);
    if (TEAM) {
      document.title = "apns-mock inbox: " + truncate(TEAM, 40);
      $("clear").title = "DELETE /v1/notifications?team=" + truncate(TEAM, 40) + ": forget this team's records";
    }
  }
  let teamsShown = null;
  async function loadTeams() {
    let list;
    try { list = await api("GET", "/v1/teams", undefined, { unscoped: true }); } catch (error) { return; }
    const teams = Array.isArray(list && list.teams) ? list.teams : [];
    const known = teams.some((team) => team.teamId === TEAM);
    const shown = JSON.stringify([teams.map((team) => [team.teamId, team.apps]), known]);
    if (shown === teamsShown) return;   // unchanged: leave an open picker alone
    teamsShown = shown;
    const picker = $("team-picker");
    picker.replaceChildren(new Option("all teams", ""));
    for (const team of teams) {
      const apps = Array.isArray(team.apps) ? team.apps : [];
      const label = team.teamId + (apps.length ? " (" + apps[0] + (apps.length > 1 ? ", +" + (apps.length - 1) : "") + ")" : "");
      picker.add(new Option(truncate(label, 80), team.teamId));
    }
    if (TEAM && !known) picker.add(new Option(truncate(TEAM, 40) + " (not a team of this mock)", TEAM));
    picker.value = TEAM;
    $("team-name").parentElement.classList.toggle("unknown", TEAM !== "" && !known);
    $("team-choice").hidden = false;
  }
  $("team-picker").addEventListener("change", () => {
    const url = new URL(location.href);
    const team = $("team-picker").value;
    if (team) url.searchParams.set("team", team); else url.searchParams.delete("team");
    location.assign(url.toString());
  });

  // ---------- statistics (GET /v1/stats) ----------
  // The header's accepted and rejected counts are the mock's, counted as the records are (since
  // start or the last Clear or reset), so they match the cards; the page polls every second and
  // soon after records arrive. A change of `clears` means the records were cleared by someone else
  // (POST /v1/reset, DELETE /v1/notifications): the page starts again as at Clear.
  async function pollStats() {
    if (state.clearing) return;
    const ticket = ++state.statsTicket;
    let stats;
    try { stats = await api("GET", "/v1/stats"); } catch (error) { return; /* shown by the stream's status */ }
    if (ticket <= state.statsApplied || state.clearing) return;
    state.statsApplied = ticket;
    // `clears` moves only when these counts' own records were cleared (another team's reset
    // leaves the whole mock's alone); older mocks have only the baseline of the counts.
    const baseline = typeof stats.clears === "number" ? stats.clears
      : stats.sinceStart ? stats.sinceStart.requests - stats.requests : 0;
    if (state.baseline !== null && baseline !== state.baseline) {
      state.baseline = baseline;
      startAgain("since a reset at " + clock());
      return;
    }
    state.baseline = baseline;
    if (state.basis === null) state.basis = baseline === 0 ? "since start" : "since the last Clear or reset";
    state.stats = stats;
    $("count-accepted").textContent = stats.accepted.toLocaleString();
    $("count-rejected").textContent = stats.rejected.toLocaleString();
    $("count-basis").textContent = state.basis;
    // The totals since start only when they differ from the counts (after a Clear or reset).
    setText($("count-since-start"), baseline > 0 && stats.sinceStart
      ? stats.sinceStart.requests.toLocaleString() + " requests since start" : "");
    $("count-connections").textContent = stats.connections.open.toLocaleString();
    if (stats.refusedStreams) $("count-refused").textContent = stats.refusedStreams.total.toLocaleString();
    if (stats.goaways) $("count-goaways").textContent = stats.goaways.total.toLocaleString();
    chartSample(stats, performance.now());
    updateNotices();
  }
  // Soon after records arrived, so that the counts follow the cards (at most 4 times a second).
  function pollStatsSoon() {
    if (state.statsTimer) return;
    state.statsTimer = setTimeout(() => { state.statsTimer = null; if (!state.needToken) pollStats(); }, 250);
  }
  function clock() { return new Date().toLocaleTimeString([], { hour12: false }); }

  // ---------- the rate chart: answers per second by outcome, from /v1/stats deltas ----------
  const ACCEPTED = "accepted", NO_ANSWER = "no answer (fault action)", OTHER = "other rejections";
  const REASON_COLORS = ["#d70015", "#ff9f0a", "#af52de", "#ff2d55", "#a2845e", "#32ade6"];
  const CHART_REASONS = 6;   // reasons with a colour of their own; the rest are "other rejections"

  // One sample per second or more (never from the extra polls in between): the accepted and
  // rejected answers since the previous sample, from the totals since start (which Clear and reset
  // do not move back), the rejections split by reason and the answers a fault action withheld.
  function chartSample(stats, now) {
    const chart = state.chart;
    const reasons = stats.byReason || {};
    let byReasons = 0;
    for (const count of Object.values(reasons)) byReasons += count;
    const totals = stats.sinceStart || stats;
    // The samples are placed on the mock's own clock: its uptime when it counted
    // (averageRequestsPerSecond is sinceStart.requests over it; the browser's clock until the first
    // request), so that an answer slow to reach a busy browser draws no dip, spike or gap.
    const uptime = stats.sinceStart && stats.averageRequestsPerSecond > 0 ? stats.sinceStart.requests / stats.averageRequestsPerSecond : null;
    const current = { at: now, t: uptime !== null ? uptime * 1000 : now, uptime, accepted: totals.accepted,
      rejected: totals.rejected, reasons, noAnswer: stats.rejected - byReasons, baseline: state.baseline };
    const prev = chart.prev;
    if (prev && now - prev.at < 950) return;
    chart.prev = current;
    if (!prev) { chart.now = current.t; drawChart(); return; }
    if (prev.uptime === null && uptime !== null) {
      // The first requests: what was drawn on the browser's clock moves onto the mock's.
      const shift = current.t - now;
      for (const sample of chart.samples) sample.end += shift;
      prev.t += shift;
    }
    let seconds = (current.t - prev.t) / 1000;
    if (!(seconds >= 0.2)) seconds = (now - prev.at) / 1000;
    // Across a reset the split restarts from zero; the totals never do.
    const same = prev.baseline === current.baseline;
    const values = new Map();
    const accepted = Math.max(0, current.accepted - prev.accepted);
    const rejected = Math.max(0, current.rejected - prev.rejected);
    if (accepted) values.set(ACCEPTED, accepted);
    let explained = 0;
    for (const [reason, count] of Object.entries(reasons)) {
      const delta = Math.min(rejected - explained, Math.max(0, count - (same ? prev.reasons[reason] || 0 : 0)));
      if (delta > 0) { values.set(reason, delta); explained += delta; }
    }
    const withheld = Math.min(rejected - explained, Math.max(0, current.noAnswer - (same ? prev.noAnswer : 0)));
    if (withheld > 0) { values.set(NO_ANSWER, withheld); explained += withheld; }
    if (rejected > explained) values.set(OTHER, rejected - explained);
    chart.samples.push({ end: current.t, seconds, values, total: accepted + rejected });
    chart.now = current.t;
    while (chart.samples.length && chart.samples[0].end < current.t - CHART_SECONDS * 1000) chart.samples.shift();
    $("count-rps").textContent = Math.round((accepted + rejected) / seconds).toLocaleString();
    drawChart();
  }

  function colorOf(key) {
    if (key === ACCEPTED) return "#248a3d";
    if (key === NO_ANSWER) return "#5e5ce6";
    if (key === OTHER) return "#8e8e93";
    const colors = state.chart.colors;
    if (!colors.has(key)) colors.set(key, REASON_COLORS[colors.size % REASON_COLORS.length]);
    return colors.get(key);
  }

  function compact(value) {
    if (value >= 1e6) return (value / 1e6).toFixed(value >= 1e7 ? 0 : 1).replace(/\.0$/, "") + "M";
    if (value >= 1e3) return (value / 1e3).toFixed(value >= 1e4 ? 0 : 1).replace(/\.0$/, "") + "k";
    return Number.isInteger(value) ? String(value) : value.toFixed(1);
  }
  function rateText(value) { return value >= 10 || value === 0 ? Math.round(value).toLocaleString() : value.toFixed(1); }

  function drawChart() {
    const chart = state.chart;
    const canvas = $("rate-chart");
    const width = canvas.clientWidth, height = canvas.clientHeight;
    if (!width || !height) return;
    const ratio = window.devicePixelRatio || 1;
    if (canvas.width !== Math.round(width * ratio) || canvas.height !== Math.round(height * ratio)) {
      canvas.width = Math.round(width * ratio);
      canvas.height = Math.round(height * ratio);
    }
    const context = canvas.getContext("2d");
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    context.clearRect(0, 0, width, height);
    const left = 46, right = 6, top = 6, bottom = 18;
    const plotWidth = width - left - right, plotHeight = height - top - bottom;
    const now = chart.now !== undefined ? chart.now : 0;
    const xOf = (t) => left + plotWidth * (1 - (now - t) / (CHART_SECONDS * 1000));

    // The reasons seen in the window, the most frequent first; past CHART_REASONS they are "other".
    const totals = new Map();
    let peak = 0;
    for (const sample of chart.samples) {
      for (const [key, count] of sample.values) totals.set(key, (totals.get(key) || 0) + count);
      peak = Math.max(peak, sample.total / sample.seconds);
    }
    const reasons = [...totals.keys()].filter((key) => key !== ACCEPTED && key !== NO_ANSWER && key !== OTHER)
      .sort((a, b) => totals.get(b) - totals.get(a));
    const ownColor = new Set(reasons.slice(0, CHART_REASONS));
    const order = [ACCEPTED, ...reasons.slice(0, CHART_REASONS), OTHER, NO_ANSWER];
    const keyOf = (key) => key === ACCEPTED || key === NO_ANSWER || key === OTHER || ownColor.has(key) ? key : OTHER;

    // A round top for the scale: 1, 2 or 5 times a power of ten.
    let scale = 1;
    if (peak > 1) {
      const power = Math.pow(10, Math.floor(Math.log10(peak)));
      scale = [1, 2, 5, 10].map((m) => m * power).find((m) => m >= peak);
    }
    context.font = "11px system-ui, sans-serif";
    context.fillStyle = "#6e6e73";
    context.strokeStyle = "#e5e5ea";
    context.lineWidth = 1;
    context.textAlign = "right";
    context.textBaseline = "middle";
    for (const fraction of peak > 0 ? [0, 0.5, 1] : [0]) {
      const y = Math.round(top + plotHeight * (1 - fraction)) + 0.5;
      context.beginPath(); context.moveTo(left, y); context.lineTo(left + plotWidth, y); context.stroke();
      context.fillText(compact(scale * fraction) + "/s", left - 5, y);
    }
    context.textAlign = "center";
    context.textBaseline = "top";
    for (let minute = CHART_SECONDS / 60; minute >= 0; minute--) {
      const x = xOf(now - minute * 60000);
      context.textAlign = minute === 0 ? "right" : minute === CHART_SECONDS / 60 ? "left" : "center";
      context.fillText(minute === 0 ? "now" : "\u2212" + minute + " min", x, top + plotHeight + 4);
    }

    // One stacked bar per sample, as wide as the time it covers.
    for (const sample of chart.samples) {
      const x0 = Math.max(left, xOf(sample.end - sample.seconds * 1000)), x1 = xOf(sample.end);
      if (x1 <= left) continue;
      const barWidth = Math.max(1, x1 - x0 - (x1 - x0 > 3 ? 1 : 0));
      const stacked = new Map();
      for (const [key, count] of sample.values) stacked.set(keyOf(key), (stacked.get(keyOf(key)) || 0) + count);
      let y = top + plotHeight;
      for (const key of order) {
        const count = stacked.get(key);
        if (!count) continue;
        const barHeight = Math.max(1, (count / sample.seconds) / scale * plotHeight);
        context.fillStyle = colorOf(key);
        context.fillRect(x0, y - barHeight, barWidth, barHeight);
        y -= barHeight;
      }
    }
    if (peak === 0) {
      context.fillStyle = "#6e6e73";
      context.textAlign = "center";
      context.textBaseline = "middle";
      context.fillText(chart.samples.length ? "no requests in the last " + CHART_SECONDS / 60 + " minutes" : "measuring\u2026",
        left + plotWidth / 2, top + plotHeight / 2);
    }

    // The legend, as text: each outcome's rate in the latest sample and its count in the window.
    const latest = chart.samples[chart.samples.length - 1];
    const legend = $("rate-legend");
    legend.replaceChildren();
    const described = [];
    for (const key of order) {
      const members = [...totals.keys()].filter((k) => keyOf(k) === key);
      if (!members.length) continue;
      let inWindow = 0, rate = 0;
      for (const member of members) {
        inWindow += totals.get(member);
        if (latest && latest.values.get(member)) rate += latest.values.get(member) / latest.seconds;
      }
      const item = el("li");
      item.dataset.outcome = key;
      const swatch = el("span", "swatch");
      swatch.style.background = colorOf(key);
      item.append(swatch, el("span", "name", key), el("b", null, rateText(rate) + "/s"),
        el("span", "window", "(" + inWindow.toLocaleString() + " in " + CHART_SECONDS / 60 + " min)"));
      if (key === OTHER && members.length > 1) item.title = members.join(", ");
      legend.append(item);
      described.push(key + " " + rateText(rate) + " per second");
    }
    if (!legend.childElementCount) {
      legend.append(el("li", "empty", chart.samples.length ? "No answers in the last " + CHART_SECONDS / 60 + " minutes."
        : "Measuring: the first bar comes with the second answer of /v1/stats, a second after the first."));
    }
    setText($("rate-now"), peak > 0 ? "peak " + rateText(peak) + "/s" : "");
    canvas.dataset.samples = String(chart.samples.length);
    canvas.dataset.peak = String(Math.round(peak));
    canvas.setAttribute("aria-label", "Answers per second over the last " + CHART_SECONDS / 60 + " minutes, peak " +
      rateText(peak) + (described.length ? "; now " + described.join(", ") : "; none"));
  }
  window.addEventListener("resize", () => drawChart());

  // ---------- the event stream (GET /v1/events, read with fetch so that it can carry the token) ----------
  // The filter as the query API and the stream take it.
  function queryParameters() {
    const parameters = new URLSearchParams();
    for (const name of FILTERS) {
      const value = $("f-" + name).value.trim();
      if (value) parameters.set(name, value);
    }
    parameters.set("outcome", $("f-outcome").value);
    return parameters;
  }
  function formFiltered() { return [...queryParameters().keys()].length > 1 || $("f-outcome").value !== "all"; }
  // Whether the page shows a part of the records whose seqs the counts cannot place: a filter's
  // matches, or one team's records (spread among every team's seqs).
  function isFiltered() { return TEAM !== "" || formFiltered(); }
  function matchingWhat() { return formFiltered() ? "matching the filter" : "of this team"; }
  function filterParameters() {
    const parameters = queryParameters();
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
      const response = await fetch(scoped("/v1/events?" + filterParameters()), { headers, signal: controller.signal, cache: "no-store" });
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
    showNotices(state.refused, line, "refused-notice",
      "Refused streams (RST_STREAM REFUSED_STREAM): a client that does not retry them loses those pushes, and they are not records.");
  }

  // GOAWAYs the mock sent are no records either: the latest few, with their cause.
  function addGoAway(notice) {
    const line = "Connection " + notice.connectionId + ": GOAWAY " + notice.code + " (" + notice.cause + ")" +
      ", last stream " + notice.lastStreamId + (notice.debugData ? ", " + notice.debugData : "") +
      " \u2014 streams above it were not processed";
    showNotices(state.goaways, line, "goaway-notice",
      "GOAWAY sent: clients resend the streams above the last stream id on a new connection.");
  }

  // Keeps the newest five of `lines` (newest first) and shows them in the notice box `id`.
  function showNotices(lines, line, id, titleText) {
    lines.unshift(line);
    lines.length = Math.min(lines.length, 5);
    const box = $(id);
    box.hidden = false;
    box.textContent = "";
    const title = document.createElement("b");
    title.textContent = titleText;
    const list = document.createElement("ul");
    for (const text of lines) {
      const item = document.createElement("li");
      item.textContent = text;
      list.appendChild(item);
    }
    box.append(title, list);
    pollStats();
  }

  // Records of the stream the page did not show (skipped by the server, dropped by the page, or
  // jumped over when it resumed): the summary above the feed and the header use it with a filter,
  // where the mock's own numbers do not say how many records match.
  function addSkipped(count) {
    if (!count) return;
    state.skipped += count;
    updateNotices();
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
    updateShown();
    pollStatsSoon();
  }

  function setText(node, text) { if (node.textContent !== text) node.textContent = text; }
  function updateShown() {
    setText($("count-shown"), (state.kept.length + state.older.length).toLocaleString());
    $("feed-empty").hidden = state.kept.length + state.older.length > 0;
    updateNotices();
  }

  // ---------- older records: what the mock holds that the page does not show ----------
  // The mock's ring holds the records seq first..last (the newest recording.capacity since the last
  // Clear or reset); the counts say how many arrived since, so the difference was evicted: gone.
  function held(stats) {
    if (!stats) return null;
    const recording = stats.recording;
    return {
      // For one team the lowest seq it holds is not known from its counts: the search goes back to 1.
      first: TEAM ? 1 : recording.lastSeq - recording.records + 1, last: recording.lastSeq, records: recording.records,
      capacity: recording.capacity,
      gone: recording.records >= recording.capacity ? Math.max(0, stats.requests - recording.records) : 0,
    };
  }
  // The seq below which the page shows nothing (older records are looked for below it).
  function olderBefore(ring) {
    let before = state.older.length ? state.older[state.older.length - 1].seq
      : state.kept.length ? state.kept[0].seq
      : (state.lastSeq !== null ? state.lastSeq : ring.last) + 1;
    if (state.olderScanned !== null) before = Math.min(before, state.olderScanned);
    return before;
  }

  function updateNotices() {
    const ring = held(state.stats);
    if (!ring) return;
    const sentences = [];
    let loadable = 0;   // records that Load older would find (-1: unknown, with a filter)
    const before = olderBefore(ring);
    const filtered = isFiltered();
    if (ring.capacity === 0) {
      sentences.push("Recording is off (recording.capacity 0): the mock keeps no records.");
    } else {
      if (!filtered) {
        loadable = Math.max(0, before - Math.max(ring.first, 1));
        if (loadable > 0) {
          sentences.push(loadable.toLocaleString() + " older record" + (loadable === 1 ? "" : "s") + " not shown (seq " +
            Math.max(ring.first, 1).toLocaleString() + "–" + (before - 1).toLocaleString() + ", still held by the mock).");
        }
      } else if (state.olderExhausted || before <= ring.first) {
        if (state.olderExhausted) sentences.push(formFiltered() ? "No older records match the filter." : "No older records of this team are held.");
      } else {
        loadable = -1;
        sentences.push("Older records " + matchingWhat() + " may be held" + (TEAM ? "." : " (the mock holds seq " +
          ring.first.toLocaleString() + "–" + ring.last.toLocaleString() + ")."));
      }
      if (ring.gone > 0) {
        sentences.push(ring.gone.toLocaleString() + " older record" + (ring.gone === 1 ? " was" : "s were") +
          " evicted and " + (ring.gone === 1 ? "is" : "are") + " gone: the mock keeps the newest " +
          ring.capacity.toLocaleString() + " (recording.capacity).");
      }
    }
    // The summary above the feed: what is shown of what the mock holds, and where the rest is.
    const shown = state.kept.length + state.older.length;
    let summary = "", notShown = state.skipped;
    if (ring.capacity > 0 && !filtered) {
      notShown = Math.max(0, ring.records - shown);
      const others = Math.max(0, notShown - loadable);
      if (shown > 0 && notShown > 0) {
        const parts = [];
        if (loadable > 0) parts.push(loadable.toLocaleString() + " older than these (Load older, at the end of the page)");
        if (others > 0) parts.push(others.toLocaleString() + " between and after them were skipped (the page takes at most " +
          MAX_RATE.toLocaleString() + " records a second and keeps the newest " + KEEP + ")");
        summary = "Showing " + shown.toLocaleString() + " of the " + ring.records.toLocaleString() +
          " records the mock holds: " + parts.join("; ") + ".";
        if (ring.gone > 0) summary += " " + ring.gone.toLocaleString() + " more " + (ring.gone === 1 ? "was" : "were") + " evicted and " + (ring.gone === 1 ? "is" : "are") + " gone.";
      }
    } else if (state.skipped > 0) {
      summary = "Not every matching record is shown: " + state.skipped.toLocaleString() + " were skipped (the page takes at most " +
        MAX_RATE.toLocaleString() + " records a second and keeps the newest " + KEEP + "); Load older, at the end of the page, looks for older ones.";
    }
    const top = $("skip-notice");
    top.hidden = summary === "";
    setText(top, summary);
    setText($("count-skipped"), notShown.toLocaleString());

    const notice = $("older-notice");
    notice.hidden = sentences.length === 0;
    setText($("older-text"), sentences.join(" "));
    const button = $("older-load");
    button.hidden = loadable === 0;
    const full = state.older.length >= OLDER_MAX;
    button.disabled = state.loadingOlder || full;
    setText(button, loadable > 0 ? "Load " + Math.min(OLDER_PAGE, loadable) + " older" : "Load older");
    button.title = full ? "The page shows at most " + OLDER_MAX.toLocaleString() + " older records: the JSON link has the rest"
      : "GET /v1/notifications for the records before the oldest shown";
    const link = $("older-link");
    link.hidden = loadable === 0;
    const parameters = queryParameters();
    parameters.set("since", String(Math.max(ring.first - 1, before - 1 - 1000, 0)));
    parameters.set("limit", "1000");
    const href = scoped("/v1/notifications?" + parameters);
    if (link.getAttribute("href") !== href) link.setAttribute("href", href);

    // Loaded older records: their range, and what lies between them and the live feed.
    const section = $("older");
    section.hidden = state.older.length === 0;
    if (state.older.length) {
      const newest = state.older[0].seq, oldest = state.older[state.older.length - 1].seq;
      setText($("older-title"), "Older records, loaded: seq " + oldest.toLocaleString() + "–" + newest.toLocaleString());
      const gap = state.kept.length ? state.kept[0].seq - newest - 1 : 0;
      const gapNotice = $("older-gap");
      gapNotice.hidden = gap <= 0;
      if (gap > 0) {
        setText(gapNotice, filtered
          ? "Records after seq " + newest.toLocaleString() + " up to the live feed's oldest are not shown here: the live feed keeps its newest " + KEEP + "."
          : gap.toLocaleString() + " record" + (gap === 1 ? "" : "s") + " between these and the live feed " +
            (gap === 1 ? "is" : "are") + " not shown: the live feed keeps its newest " + KEEP + ".");
      }
    }
  }

  async function loadOlder() {
    if (state.loadingOlder || state.older.length >= OLDER_MAX) return;
    state.loadingOlder = true;
    $("older-load").disabled = true;
    const message = $("older-message");
    message.className = "message";
    message.textContent = "";
    const generation = state.feedGeneration;
    try {
      const ring = held(await api("GET", "/v1/stats"));
      const filtered = isFiltered();
      // Without a filter the OLDER_PAGE seqs before the oldest shown are the records to load;
      // with one, OLDER_SCAN seqs at a time are looked through until some match.
      const window = filtered ? OLDER_SCAN : OLDER_PAGE;
      let before = olderBefore(ring), found = [];
      for (let round = 0; round < 20 && found.length === 0 && before > ring.first; round++) {
        const since = Math.max(ring.first - 1, before - 1 - window, 0);
        const parameters = queryParameters();
        parameters.set("since", String(since));
        parameters.set("limit", String(window));
        const page = await api("GET", "/v1/notifications?" + parameters);
        if (generation !== state.feedGeneration) return;
        const limit = before;
        found = page.notifications.filter((record) => record.seq < limit);
        before = since + 1;
        state.olderScanned = found.length ? null : before;
      }
      if (found.length === 0) {
        if (before <= ring.first) state.olderExhausted = true;
        message.textContent = before <= ring.first
          ? (TEAM && !formFiltered() ? "Nothing older: the mock holds no older record of this team."
            : "Nothing older: the mock holds no record before seq " + Math.max(ring.first, 1).toLocaleString() + ".")
          : "Nothing matched in the " + (20 * window).toLocaleString() + " records looked through; Load older looks further.";
      }
      found = found.slice(-Math.min(OLDER_PAGE, OLDER_MAX - state.older.length));
      for (let index = found.length - 1; index >= 0; index--) appendOlder(found[index]);
    } catch (error) {
      message.className = "message bad";
      message.textContent = truncate(error.message, 300);
    } finally {
      state.loadingOlder = false;
      updateShown();
    }
  }
  $("older-load").addEventListener("click", loadOlder);

  function appendOlder(record) {
    const node = render(record, classify(record));
    node.dataset.seq = String(record.seq);
    state.olderRecords.set(record.seq, record);
    $("older-feed").append(node);
    state.older.push({ seq: record.seq, el: node });
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
    // Accepted as the query API counts it: a success without a reason (200, or 201/204 for
    // channels); a 431 for an oversized header list has no reason and is rejected.
    if (record.status === null || record.reason || record.status >= 400) return "rejected";
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
    const record = state.records.get(seq) || state.olderRecords.get(seq);
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
      const response = await fetch(scoped("/v1/notifications/" + seq + ".apns"), { headers, cache: "no-store" });
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
  // Clear forgets the records and starts the counts again: the page then shows what the mock
  // holds from there, read again from the stream, and never an answer to /v1/stats sent before.
  $("clear").addEventListener("click", async () => {
    state.clearing = true;
    state.statsApplied = ++state.statsTicket;
    try {
      await api("DELETE", "/v1/notifications");
      state.clearing = false;
      state.baseline = null;
      startAgain("since Clear at " + clock());
    } catch (error) {
      state.clearing = false;
      setStatus("clear failed: " + truncate(error.message, 80), "error");
    }
  });

  // After Clear, or a reset seen in the counts: no card from before stays, the stream starts
  // again from what the mock holds (the newest KEEP of it), and the counts say since when.
  function startAgain(basis) {
    state.basis = basis;
    $("count-basis").textContent = basis;
    resetFeed();
    state.lastSeq = null;
    state.goaways = [];
    $("goaway-notice").hidden = true;
    if (!state.paused) connect();
    pollStats();
  }

  function resetFeed() {
    state.queue = [];
    state.kept = [];
    state.groups.clear();
    state.records.clear();
    state.older = [];
    state.olderRecords.clear();
    state.olderScanned = null;
    state.olderExhausted = false;
    state.feedGeneration++;
    $("older-feed").replaceChildren();
    $("older-message").textContent = "";
    state.skipped = 0;
    $("feed").replaceChildren();
    $("skip-notice").hidden = true;
    state.refused = [];
    $("refused-notice").hidden = true;
    updateShown();
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
    loadTeams();
    loadDevices();
    loadFaults();
  }

  fillPushTypes();
  showTeam();
  drawChart();
  setInterval(() => { if (!state.needToken) pollStats(); }, 1000);
  setInterval(() => { if (!state.needToken) { loadTeams(); loadDevices(); loadFaults(); } }, 5000);
  start();
})();
