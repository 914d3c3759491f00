// The koordqueue dashboard page: lays out the state the server pushes (server-sent events).
// Every number, order and reason comes from the server (koordqueue/cli/dashboard_model.py);
// this only builds the DOM, with textContent only (no HTML from the cluster is interpreted).
"use strict";
(function () {
  const $ = (selector) => document.querySelector(selector);
  let selected = null; // {namespace, name} of the explained unit

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = String(value);
      else if (key === "class") node.className = value;
      else if (key.startsWith("data-")) node.setAttribute(key, String(value));
      else if (key === "style") Object.assign(node.style, value);
      else node.setAttribute(key, String(value));
    }
    for (const child of children) if (child) node.append(child);
    return node;
  }

  function td(text, cls) { return el("td", { text: text, class: cls }); }

  function fill(tbody, rows) { tbody.replaceChildren(...rows); }

  function usageBar(r) {
    const bar = el("div", {
      class: "bar",
      title: `used ${r.used} (guaranteed ${r.guaranteed}, oversold ${r.oversold}), min ${r.min}, max ${r.max}`,
    },
      el("span", { class: "seg guaranteed", style: { width: r.bar.guaranteed + "%" } }),
      el("span", { class: "seg oversold", style: { width: r.bar.oversold + "%" } }),
      el("span", { class: "mark min", style: { left: r.bar.min + "%" } }));
    if (r.bar.max !== null) bar.append(el("span", { class: "mark max", style: { left: r.bar.max + "%" } }));
    return bar;
  }

  function quotaRows(quotas) {
    const rows = [];
    for (const q of quotas) {
      const resources = q.resources.length ? q.resources : [null];
      resources.forEach((r, i) => {
        const name = el("td", { class: "quota-name", style: { paddingLeft: (8 + 18 * q.depth) + "px" } });
        if (i === 0) {
          name.append(q.name);
          if (q.held) name.append(" ", el("span", { class: "held", text: "held" }));
        }
        const row = el("tr", {
          "data-quota": q.name, "data-resource": r ? r.resource : "",
          class: r && r.overMax ? "over-max" : null,
        }, name);
        if (r) {
          row.append(td(r.resource), td(r.min, "num min"), td(r.max, "num max"), td(r.used, "num used"),
            el("td", {}, usageBar(r)), td(`${r.self} / ${r.children}`, "num split"),
            td(`${r.guaranteed} / ${r.oversold}`, "num kind"));
        } else {
          row.append(td("-"), td(""), td(""), td(""), td(""), td(""), td(""));
        }
        row.append(td(i === 0 && q.pending !== null ? String(q.pending) : "", "num pending"),
          td(i === 0 ? (q.hasQueue ? (q.held ? "Hold" : "open") : "no Queue") : "", "queue"));
        rows.push(row);
      });
    }
    return rows;
  }

  function explainButton(u) {
    const button = el("button", { type: "button", class: "explain", text: "explain" });
    button.addEventListener("click", () => { selected = { namespace: u.namespace, name: u.name }; explain(); });
    return button;
  }

  function isSelected(u) {
    return selected && selected.namespace === u.namespace && selected.name === u.name;
  }

  function pendingQueues(queues) {
    if (!queues.length) return [el("p", { class: "muted", text: "No pending units." })];
    return queues.map((q) => {
      const head = el("h3", {}, `queue ${q.name} `, el("span", { class: "muted", text: `(${q.total} pending)` }));
      if (q.held) head.append(" ", el("span", { class: "held", text: "held" }));
      const body = el("tbody", {}, ...q.units.map((u) => el("tr", {
        "data-unit": u.key, class: isSelected(u) ? "selected" : null,
      },
        el("td", {
          class: "num position", text: u.positionInQueue === null ? "-" : String(u.positionInQueue),
          title: u.position === null ? "no round tries it now" : `${u.position} in the round, ${u.positionInQuota} in its quota`,
        }),
        td(u.namespace), td(u.name, "name"), td(String(u.priority), "num"), td(u.request),
        td(u.phase), td(u.reason, "reason"), td(u.message, "message"),
        el("td", {}, explainButton(u)))));
      const table = el("table", { class: "units" },
        el("thead", {}, el("tr", {}, ...["#", "namespace", "name", "priority", "request", "phase",
          "reason", "message", ""].map((h) => el("th", { text: h })))), body);
      return el("div", { class: "queue", "data-queue": q.name }, head, table);
    });
  }

  function admittedRows(units) {
    return units.map((u) => el("tr", { "data-unit": u.key, class: isSelected(u) ? "selected" : null },
      td(u.namespace), td(u.name, "name"), td(u.quota), td(u.phase), td(String(u.priority), "num"),
      td(u.request), td(u.since), el("td", {}, explainButton(u))));
  }

  function eventRows(events) {
    return events.map((e) => el("tr", { class: e.type },
      td(e.time), td(e.type), td(e.reason, "reason"), td(e.object), td(String(e.count), "num"),
      td(e.message, "message")));
  }

  function render(state) {
    $("#cluster").textContent = state.cluster;
    $("#round").textContent = state.round ? `round ${state.round.number} at ${state.round.time}` : "no round yet";
    const error = $("#visibility-error");
    error.hidden = !state.visibilityError;
    error.textContent = state.visibilityError || "";
    fill($("#quota-tree tbody"), quotaRows(state.quotas));
    $("#pending-total").textContent = `(${state.pendingTotal})`;
    $("#pending-queues").replaceChildren(...pendingQueues(state.pending));
    $("#admitted-total").textContent = `(${state.admittedTotal})`;
    fill($("#admitted-units tbody"), admittedRows(state.admitted));
    fill($("#event-list tbody"), eventRows(state.events));
    $("#updated").textContent = state.updated;
    document.body.dataset.version = state.version;
    if (selected) explain();
  }

  function explain() {
    const unit = selected;
    const query = new URLSearchParams({ namespace: unit.namespace, name: unit.name });
    fetch("api/explain?" + query).then((r) => r.json()).then((doc) => {
      if (selected !== unit) return; // another unit was chosen meanwhile
      $("#explain").hidden = false;
      $("#explain-unit").textContent = doc.unit;
      $("#explain-text").textContent = doc.text || doc.error;
    }).catch((err) => { $("#explain-text").textContent = String(err); });
  }

  $("#explain-close").addEventListener("click", () => { selected = null; $("#explain").hidden = true; });

  function status(text) {
    const node = $("#status");
    node.textContent = text;
    node.className = "status " + text;
  }

  const source = new EventSource("api/stream");
  source.addEventListener("state", (event) => { render(JSON.parse(event.data)); status("live"); });
  source.addEventListener("error", () => status("reconnecting")); // EventSource retries by itself
})();
