// The Entries map (templates/knowledge/entries/graph.html): entries as nodes, relations as edges.
// Hover or tap an edge for its evidence; select a node to list its neighbours as buttons (the
// keyboard walk: n / p move through entries, arrows pick a neighbour, Enter walks to it).
(function () {
  performance.mark("graph-start"); // the marks say where a drawing's time goes (the browser test prints them)
  const box = document.getElementById("graph");
  const source = document.getElementById("graph-data");
  if (!box || !source || typeof cytoscape !== "function") return;
  const data = JSON.parse(source.textContent);
  const panel = document.getElementById("graph-selected");
  const hover = document.getElementById("graph-hover");
  const find = document.getElementById("graph-find");
  const names = new Map(data.nodes.map((n) => [n.name, String(n.id)]));
  const order = data.nodes.map((n) => String(n.id)); // by name, as the server sent them
  const big = data.nodes.length > 400; // a force layout of thousands of nodes takes seconds

  const cy = cytoscape({
    container: box,
    elements: [
      ...data.nodes.map((n) => ({ data: { id: String(n.id), label: n.name, type: n.type, store: n.store } })),
      ...data.edges.map((e) => ({
        data: { id: "r" + e.id, source: String(e.source), target: String(e.target), predicate: e.predicate, evidence: e.evidence },
      })),
    ],
    style: [
      // A big map names only the selected entry and its neighbours: measuring thousands of labels
      // is most of the time a first drawing takes.
      { selector: "node", style: { label: big ? "" : "data(label)", "font-size": 10, "min-zoomed-font-size": 8, width: 14, height: 14, "background-color": "#4a6fa5" } },
      { selector: "node.near, node:selected", style: { label: "data(label)" } },
      { selector: "node:selected", style: { "background-color": "#d9822b", width: 22, height: 22 } },
      { selector: "node.near", style: { "background-color": "#2b8a3e" } },
      { selector: "node.picked", style: { "border-width": 3, "border-color": "#111" } },
      { selector: "edge", style: { width: 1, "line-color": "#aab", "target-arrow-shape": "triangle", "target-arrow-color": "#aab", "curve-style": "haystack" } },
      { selector: "edge.near", style: { width: 2, "line-color": "#2b8a3e", label: "data(predicate)", "font-size": 9, "curve-style": "bezier" } },
    ],
    layout: big
      ? { name: "concentric", concentric: (node) => node.degree(), levelWidth: () => 2, animate: false, minNodeSpacing: 4 }
      : { name: "cose", animate: false, randomize: false },
    wheelSensitivity: 0.3,
    hideEdgesOnViewport: big,
    textureOnViewport: big,
  });

  performance.mark("graph-drawn");
  let current = null; // the selected node's id
  let neighbours = []; // [{id, label, predicate, out}] of the selected node
  let picked = -1; // which neighbour the arrow keys point at

  const describe = (edge) =>
    `${edge.source().data("label")} — ${edge.data("predicate")} → ${edge.target().data("label")}; evidence: ` +
    (edge.data("evidence").join(", ") || "none");

  function el(tag, text, attrs) {
    const node = document.createElement(tag);
    if (text) node.textContent = text;
    Object.entries(attrs || {}).forEach(([k, v]) => node.setAttribute(k, v));
    return node;
  }

  function select(id) {
    const node = cy.getElementById(id);
    if (!node.length) return;
    cy.elements().removeClass("near picked").unselect();
    node.select();
    current = id;
    picked = -1;
    const edges = node.connectedEdges();
    edges.addClass("near");
    edges.connectedNodes().not(node).addClass("near");
    neighbours = edges.map((e) => {
      const out = e.source().id() === id;
      const other = out ? e.target() : e.source();
      return { id: other.id(), label: other.data("label"), predicate: e.data("predicate"), out, edge: e };
    });
    panel.replaceChildren();
    panel.append(el("h3", node.data("label")));
    panel.append(el("p", `${node.data("type") || "no type"} · ${node.data("store")}`, { class: "muted small" }));
    const open = el("a", "Open the entry", { href: `/knowledge/entries/${id}/` });
    panel.append(open);
    panel.append(el("h4", `Neighbours (${neighbours.length})`));
    const list = el("ul", "", { class: "plain graph-neighbours" });
    neighbours.forEach((n, i) => {
      const item = el("li");
      const text = n.out ? `${n.predicate} → ${n.label}` : `${n.label} → ${n.predicate} (this)`;
      const button = el("button", text, { type: "button", "data-node": n.id, "data-index": String(i), title: describe(n.edge) });
      item.append(button);
      list.append(item);
    });
    if (!neighbours.length) list.append(el("li", "none", { class: "muted" }));
    panel.append(list);
    const cites = el("button", "Show what cites it", { type: "button", "data-citing": id });
    panel.append(cites);
    panel.append(el("div", "", { id: "graph-citing" }));
    cy.animate({ center: { eles: node } }, { duration: 0 });
  }

  function pick(step) {
    if (!neighbours.length) return;
    picked = (picked + step + neighbours.length) % neighbours.length;
    cy.nodes().removeClass("picked");
    const n = neighbours[picked];
    cy.getElementById(n.id).addClass("picked");
    hover.textContent = `Neighbour ${picked + 1} of ${neighbours.length}: ` + describe(n.edge);
  }

  function step(delta) {
    const at = current === null ? -1 : order.indexOf(current);
    const next = order[(at + delta + order.length) % order.length];
    if (next !== undefined) select(next);
  }

  cy.on("tap", "node", (event) => select(event.target.id()));
  cy.on("mouseover tap", "edge", (event) => { hover.textContent = describe(event.target); });
  cy.on("mouseover", "node", (event) => { hover.textContent = event.target.data("label"); });

  panel.addEventListener("click", async (event) => {
    const neighbour = event.target.closest("[data-node]");
    if (neighbour) {
      select(neighbour.dataset.node);
      const first = panel.querySelector("[data-node]");
      (first || panel.querySelector("h3")).focus();
      return;
    }
    const citing = event.target.closest("[data-citing]");
    if (citing) {
      const response = await fetch(`/knowledge/entries/${citing.dataset.citing}/citing`, { credentials: "same-origin" });
      // The server renders the fragment with Django's escaping.
      document.getElementById("graph-citing").innerHTML = response.ok ? await response.text() : "<p>Could not load it.</p>";
    }
  });

  box.addEventListener("keydown", (event) => {
    const keys = { n: () => step(1), p: () => step(-1), ArrowRight: () => pick(1), ArrowDown: () => pick(1), ArrowLeft: () => pick(-1), ArrowUp: () => pick(-1) };
    if (keys[event.key]) {
      keys[event.key]();
      event.preventDefault();
    } else if (event.key === "Enter" && picked >= 0) {
      select(neighbours[picked].id);
      event.preventDefault();
    }
  });

  find.addEventListener("change", () => {
    const id = names.get(find.value);
    if (id) select(id);
  });

  performance.mark("graph-ready"); // read by the browser test and the bench
  box.dataset.ready = String(data.nodes.length);
})();
