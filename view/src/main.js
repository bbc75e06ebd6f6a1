// The graph view of kg-mcp's navigation tools, an MCP App (io.modelcontextprotocol/ui).
//
// The host sends the tool's result (ui/notifications/tool-result); its structured content is
// drawn with cytoscape.js. A click on an entity calls `search` on it through the host
// (tools/call) and merges what comes back; a double click reads its card, the resource
// kg://entity/{id}. The list beside the graph holds the same nodes and edges for screen readers
// and the keyboard. The theme and style variables follow the host's context.

import { App, applyDocumentTheme, applyHostFonts, applyHostStyleVariables } from "@modelcontextprotocol/ext-apps";
import cytoscape from "cytoscape";
import fcose from "cytoscape-fcose";
import { toGraph } from "./graph.js";

cytoscape.use(fcose);

const $ = (id) => document.getElementById(id);
const status = $("status");
const list = $("list");
const expanded = new Set(); // "id|direction" already searched from the view
let summary = "";

const cy = cytoscape({
  container: $("graph"),
  minZoom: 0.05,
  maxZoom: 4,
  boxSelectionEnabled: false,
  style: graphStyle(),
});

const app = new App({ name: "kg-mcp graph view", version: "1" }, {}, { autoResize: true });
app.addEventListener("toolinput", () => say("Running the tool…"));
app.addEventListener("toolresult", (result) => show(result));
app.addEventListener("toolcancelled", () => say("The tool call was cancelled."));
app.addEventListener("hostcontextchanged", (context) => follow(context));
app.onteardown = async () => ({});

// For scripts and tests that drive the view: the cytoscape instance and what it has done.
window.kgGraphView = { cy, expanded, calls: 0 };

cy.on("tap", "node", (event) => expand(event.target.id()));
cy.on("dbltap", "node", (event) => openCard(event.target.id()));
$("fit").addEventListener("click", () => cy.fit(undefined, 24));
$("relayout").addEventListener("click", () => layout(true));
$("toggle-list").addEventListener("click", (event) => {
  const panel = $("list-panel");
  panel.hidden = !panel.hidden;
  event.currentTarget.setAttribute("aria-expanded", String(!panel.hidden));
  cy.resize();
});
$("card-close").addEventListener("click", () => ($("card").hidden = true));
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape") $("card").hidden = true;
});

await app.connect();
follow(app.getHostContext() || {});

function follow(context) {
  if (context.theme) applyDocumentTheme(context.theme);
  if (context.styles?.variables) applyHostStyleVariables(context.styles.variables);
  if (context.styles?.css?.fonts) applyHostFonts(context.styles.css.fonts);
  const inset = context.safeAreaInsets; // a host's notches and overlays (Claude on mobile), in px
  if (inset) $("root").style.padding = `${inset.top || 0}px ${inset.right || 0}px ${inset.bottom || 0}px ${inset.left || 0}px`;
  cy.style(graphStyle());
}

function say(text) {
  status.textContent = text;
}

function textOf(result) {
  return (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

function show(result) {
  if (result.isError) return say(textOf(result).slice(0, 300) || "The tool failed.");
  const graph = toGraph(result.structuredContent);
  cy.elements().remove();
  expanded.clear();
  merge(graph, null);
  summary = graph.summary;
  say(`${summary} · ${counts()}`);
  layout(true);
}

function merge(graph, near) {
  const at = near ? cy.getElementById(near).position() : null;
  const added = [];
  for (const n of graph.nodes) {
    const old = cy.getElementById(n.id);
    if (old.nonempty()) {
      if (ROLE_RANK[n.role] > ROLE_RANK[old.data("role")]) old.data("role", n.role);
      if (n.hub) old.data("hub", true);
      continue;
    }
    const spot = at ? { x: at.x + (Math.random() - 0.5) * 80, y: at.y + (Math.random() - 0.5) * 80 } : undefined;
    added.push({ group: "nodes", data: { ...n, hub: Boolean(n.hub) }, position: spot });
  }
  for (const e of graph.edges) {
    if (cy.getElementById(e.id).empty()) added.push({ group: "edges", data: e });
  }
  cy.add(added);
  renderList();
  return added.length;
}

const ROLE_RANK = { none: 0, answer: 1, focus: 2, start: 3 };

// fCoSE, a force-directed layout, then the leaves of a node with many of them (a follow's
// answers, a search of a big entity) put in rings around it, inner rings first and the side
// towards its other neighbours left free: a ring of 200 stays in the window, nodes apart.
const STAR = 24; // leaves that make a node's neighbourhood a star
const SPACING = 30; // between two leaves of a ring
const GAP = 40; // between two rings

function layout(fresh) {
  cy.layout({
    name: "fcose",
    quality: "default",
    randomize: fresh,
    animate: false,
    nodeDimensionsIncludeLabels: true,
    idealEdgeLength: (edge) => (edge.target().data("kind") === "literal" ? 50 : 90),
    nodeRepulsion: () => 6500,
    nodeSeparation: 60,
    packComponents: true,
  }).run();
  for (const hub of cy.nodes()) {
    const leaves = hub.neighborhood("node").filter((n) => n.degree() === 1);
    if (leaves.length < STAR) continue;
    const [small, wide] = [leaves.filter((n) => !WIDE.has(n.data("kind"))), leaves.filter((n) => WIDE.has(n.data("kind")))];
    const outer = rings(hub, small.sort((a, b) => String(a.data("label")).localeCompare(String(b.data("label")))));
    // the counts ("3,816 more answers") below the rings, side by side
    wide.forEach((n, i) => n.position({ x: hub.position("x") + (i - (wide.length - 1) / 2) * 160, y: hub.position("y") + outer + GAP }));
  }
  cy.fit(undefined, 24);
}

const WIDE = new Set(["group", "cut"]); // nodes drawn as boxes as wide as their text

// Places `leaves` in rings around `hub`; returns the outer ring's radius.
function rings(hub, leaves) {
  const at = hub.position();
  const others = hub.neighborhood("node").filter((n) => n.degree() > 1);
  // the direction of the hub's other neighbours, kept free of leaves (a quarter turn)
  const towards = others.length ? Math.atan2(...others.reduce(([y, x], n) => [y + n.position("y") - at.y, x + n.position("x") - at.x], [0, 0])) : null;
  const free = towards === null ? 0 : Math.PI / 2;
  let placed = 0;
  let outer = 0;
  for (let radius = 2 * GAP; placed < leaves.length; radius += GAP) {
    const room = Math.max(1, Math.floor(((2 * Math.PI - free) * radius) / SPACING));
    const take = Math.min(room, leaves.length - placed);
    const from = towards === null ? 0 : towards + free / 2;
    for (let i = 0; i < take; i++) {
      const angle = from + ((2 * Math.PI - free) * (i + 0.5)) / take;
      leaves[placed + i].position({ x: at.x + radius * Math.cos(angle), y: at.y + radius * Math.sin(angle) });
    }
    placed += take;
    outer = radius;
  }
  return outer;
}

function counts() {
  return `${cy.nodes().length} nodes, ${cy.edges().length} edges`;
}

async function expand(id) {
  const node = cy.getElementById(id);
  if (node.empty() || !searchable(node)) return;
  const direction = $("direction").value;
  const key = `${id}|${direction}`;
  if (expanded.has(key)) return;
  expanded.add(key);
  node.data("expanded", true);
  say(`Searching ${node.data("label")} (${direction})…`);
  window.kgGraphView.calls += 1;
  try {
    const result = await app.callServerTool({ name: "search", arguments: { entity: id, direction } });
    if (result.isError) {
      expanded.delete(key);
      return say(textOf(result).slice(0, 300));
    }
    const graph = toGraph(result.structuredContent);
    const grown = merge(graph, id);
    say(`${graph.summary} · ${grown ? `${grown} new elements` : "nothing new"} · ${counts()}`);
    if (grown) layout(false);
  } catch (error) {
    expanded.delete(key);
    say(`The search failed: ${error.message || error}`);
  }
}

// An entity, or a blank node the KG gives a handle for (the tools take it back).
function searchable(node) {
  return node.data("kind") === "entity" || (node.data("kind") === "blank" && node.data("handle"));
}

async function openCard(id) {
  const node = cy.getElementById(id);
  if (node.empty() || node.data("kind") !== "entity") return;
  $("card-title").textContent = node.data("title");
  $("card-body").textContent = "Reading…";
  $("card").hidden = false;
  try {
    const read = await app.readServerResource({ uri: `kg://entity/${encodeURIComponent(id)}` });
    $("card-body").textContent = (read.contents || []).map((c) => c.text || "").join("\n");
  } catch (error) {
    $("card-body").textContent = `No card: ${error.message || error}`;
  }
}

function renderList() {
  // Starts, searched entities and answers first; each node with the edges that leave it.
  const order = (n) => -ROLE_RANK[n.data("role")];
  // Values and blank nodes without a handle are read under the edges that reach them.
  const nodes = cy.nodes().filter((n) => n.data("kind") !== "literal" && (n.data("kind") !== "blank" || n.data("handle"))).sort((a, b) => order(a) - order(b) || String(a.data("label")).localeCompare(String(b.data("label"))));
  const items = [];
  for (const n of nodes) {
    const li = document.createElement("li");
    const name = document.createElement("strong");
    name.textContent = n.data("label") || n.data("title");
    li.append(name);
    if (searchable(n)) {
      const id = document.createElement("span");
      id.className = "id";
      id.textContent = ` ${n.id()}`;
      li.append(id);
    }
    if (n.data("role") !== "none") {
      const role = document.createElement("span");
      role.className = `role ${n.data("role")}`;
      role.textContent = { start: "start", focus: "searched", answer: "answer" }[n.data("role")];
      li.append(" ", role);
    }
    if (searchable(n)) li.append(button("Expand", `Search ${n.data("label") || n.id()}`, () => expand(n.id())));
    if (n.data("kind") === "entity") li.append(button("Card", `Card of ${n.data("label")}`, () => openCard(n.id())));
    const out = n.outgoers("edge");
    if (out.length) {
      const ul = document.createElement("ul");
      for (const e of out) {
        const item = document.createElement("li");
        const target = e.target();
        item.textContent = `${e.data("label") || "→"} → ${target.data("label") || target.data("title")}`;
        ul.append(item);
      }
      li.append(ul);
    }
    items.push(li);
  }
  list.replaceChildren(...items);
}

function button(text, label, action) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = text;
  b.setAttribute("aria-label", label);
  b.addEventListener("click", action);
  return b;
}

function graphStyle() {
  const css = getComputedStyle(document.documentElement);
  const v = (name) => css.getPropertyValue(name).trim();
  const [text, bg] = [v("--text"), v("--bg")];
  return [
    { selector: "node", style: {
      label: "data(label)", color: text, "font-size": 10, "text-valign": "bottom", "text-margin-y": 3,
      "text-wrap": "ellipsis", "text-max-width": 120, "min-zoomed-font-size": 5,
      width: 16, height: 16, "background-color": v("--kg-entity"), "border-width": 0,
    } },
    { selector: 'node[kind = "literal"]', style: { shape: "round-rectangle", width: 9, height: 9, "background-color": v("--kg-literal"), "font-style": "italic", color: v("--text-2") } },
    { selector: 'node[kind = "blank"]', style: { width: 7, height: 7, "background-opacity": 0, "border-width": 1, "border-color": v("--kg-literal"), label: "" } },
    { selector: 'node[kind = "group"], node[kind = "cut"]', style: {
      shape: "round-rectangle", width: (n) => 12 + 6 * String(n.data("label")).length, height: 18, padding: 5, "text-valign": "center", "text-margin-y": 0,
      "background-color": v("--kg-group"), "border-width": 1, "border-style": "dashed", "border-color": v("--kg-edge"),
    } },
    { selector: 'node[kind = "cut"]', style: { "background-opacity": 0, "border-color": v("--kg-cut"), color: v("--kg-cut") } },
    { selector: 'node[role = "answer"]', style: { "background-color": v("--kg-answer") } },
    { selector: 'node[role = "focus"]', style: { "background-color": v("--kg-focus"), width: 22, height: 22, "font-weight": "bold" } },
    { selector: 'node[role = "start"]', style: { "background-color": v("--kg-start"), width: 26, height: 26, "font-weight": "bold" } },
    { selector: "node[?hub]", style: { "border-width": 3, "border-style": "double", "border-color": v("--kg-cut") } },
    { selector: "node[?expanded]", style: { "border-width": 2, "border-color": text } },
    { selector: "node:selected", style: { "overlay-color": v("--kg-focus"), "overlay-opacity": 0.2 } },
    { selector: "edge", style: {
      width: 1.2, "line-color": v("--kg-edge"), "target-arrow-color": v("--kg-edge"), "target-arrow-shape": "triangle",
      "arrow-scale": 0.8, "curve-style": "bezier", label: "data(label)", "font-size": 8, color: v("--text-2"),
      "text-rotation": "autorotate", "text-background-color": bg, "text-background-opacity": 0.85, "text-background-padding": 1,
      "min-zoomed-font-size": 7,
    } },
  ];
}
