// The lineage graph on a canvas (Cytoscape): cards laid out by `layered` (whole answers, thousands of nodes), drawn
// nearest-first in chunks so the start shows at once, with a legend, zoom/fit buttons, a minimap, a tooltip naming
// each node in full, and keyboard navigation (arrows follow edges, Enter opens, +/-/0 zoom).
import cytoscape from "cytoscape";
import svg from "cytoscape-svg";
import { datasetId, parseNodeId } from "./api";
import { type Box, type Link, layered, type Point } from "./layout";
import { shortName, shortNamespace } from "./names";
import { COLOURS, type GraphNode, label, runState } from "./nodes";

cytoscape.use(svg);

export type Handlers = { select(id: string): void; open(id: string): void; path(id: string): void };

const CARD = { width: 210, height: 46 };
const FIELD = { width: 170, height: 26 };
const GROUP_HEADER = 30; // a dataset box's title above its columns (column view)
const FIRST_CHUNK = 200; // nodes drawn at once: the start's neighbourhood
const CHUNK = 600; // nodes added per animation frame after the first
const MINIMAP_FROM = 60; // nodes: smaller graphs are fit to the view whole when that keeps them readable
const LARGE = 800; // past this many nodes, pan/zoom draws a texture and hides edges while moving

const icon = (body: string) => `data:image/svg+xml;utf8,${encodeURIComponent(
  `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16" width="16" height="16">${body}</svg>`)}`;
const DATASET_ICON = icon(`<rect x="1.5" y="2.5" width="13" height="11" rx="1.5" fill="none" stroke="#475569" stroke-width="1.3"/>` +
  `<path d="M1.5 6.2h13M6 6.2v7.3" stroke="#475569" stroke-width="1.3"/>`);
const JOB_ICON = icon(`<circle cx="8" cy="8" r="6.5" fill="none" stroke="#5b4fc4" stroke-width="1.3"/><path d="M6.4 4.9l4.4 3.1-4.4 3.1z" fill="#5b4fc4"/>`);


const STYLE: any[] = [
  { selector: "node", style: { label: "data(label)", "font-size": 12, "text-valign": "center", "text-halign": "center",
    "text-wrap": "wrap", "text-max-width": `${CARD.width - 40}px`, "text-margin-x": 10, "line-height": 1.35,
    width: CARD.width, height: CARD.height, "background-color": "#f1f5f9", "border-width": 1, "border-color": "#94a3b8",
    shape: "round-rectangle", color: "#1d2733", "min-zoomed-font-size": 7, "background-image": DATASET_ICON,
    "background-width": 16, "background-height": 16, "background-position-x": 10, "background-position-y": "50%",
    "background-clip": "none" } },
  { selector: "node.job", style: { "background-color": "#f5f3ff", "border-color": "#8b7fe0", "background-image": JOB_ICON,
    shape: "cut-rectangle" } },
  { selector: "node.state-COMPLETED", style: { "border-color": COLOURS.COMPLETED, "border-width": 3 } },
  { selector: "node.state-FAILED, node.state-ABORTED", style: { "border-color": COLOURS.FAILED, "border-width": 3,
    "background-color": "#fff1eb" } },
  { selector: "node.state-RUNNING", style: { "border-color": COLOURS.RUNNING, "border-width": 3, "border-style": "dashed" } },
  { selector: "node.declared", style: { "border-style": "dashed", "border-color": "#64748b", "border-width": 2,
    "background-color": "#f8fafc", color: "#475569" } },
  { selector: "node.start", style: { "background-color": "#dbe7ff", "font-weight": "bold", "border-color": "#2563eb",
    "border-width": 3 } },
  { selector: "node.dataset-group", style: { shape: "round-rectangle", "background-color": "#f8fafc", "text-valign": "top",
    "text-halign": "center", "text-margin-y": -4, "text-margin-x": 0, "font-weight": "bold", "border-color": "#94a3b8",
    padding: 8, "background-image": "none", "text-max-width": `${FIELD.width}px`, "text-wrap": "ellipsis",
    "text-background-color": "#f8fafc", "text-background-opacity": 0.9, "text-background-padding": 2 } },
  { selector: "node.field", style: { width: FIELD.width, height: FIELD.height, "font-size": 11, "background-image": "none",
    "text-margin-x": 0, "text-max-width": `${FIELD.width - 12}px`, "text-wrap": "ellipsis", "background-color": "#ffffff" } },
  { selector: "edge", style: { width: 1.5, "curve-style": "straight", "target-arrow-shape": "triangle",
    "line-color": COLOURS.read, "target-arrow-color": COLOURS.read, "arrow-scale": 0.9 } },
  { selector: "edge.write", style: { "line-color": COLOURS.write, "target-arrow-color": COLOURS.write, width: 2 } },
  { selector: "edge.indirect", style: { "line-style": "dashed" } },
  { selector: "edge.labelled:selected, edge.labelled.hover", style: { label: "data(label)", "font-size": 10,
    color: "#1d2733", "text-background-color": "#ffffff", "text-background-opacity": 0.9, "text-background-padding": 2 } },
  { selector: ".on-path", style: { "line-color": "#2563eb", "target-arrow-color": "#2563eb", width: 3,
    "border-color": "#2563eb", "border-width": 3 } },
  { selector: "node:selected", style: { "overlay-color": "#2563eb", "overlay-opacity": 0.18, "overlay-padding": 4 } },
];

let cy: cytoscape.Core | undefined;
let drawing = 0; // the draw in progress (a newer one stops an older one's chunks)

export function canvas(): cytoscape.Core | undefined {
  return cy;
}
(window as any).lineageGraph = canvas; // the browser tests read positions and frame times through it


function card(node: GraphNode): string {
  if (node.type === "DATASET_FIELD") return node.data.field;
  return `${label(node)}\n${shortNamespace(node.data.namespace ?? parseNodeId(node.id).namespace)}`;
}

// Nodes (and edges) in the order they are drawn: breadth first from the start, so the first chunk is its
// neighbourhood.
function nearestFirst(nodes: GraphNode[], start: string): GraphNode[] {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const starts = nodes.filter((n) => n.id === start || (n.type === "DATASET_FIELD" && datasetId(n.data.namespace, n.data.dataset) === start));
  const seen = new Set(starts.map((n) => n.id));
  const queue = [...starts];
  for (let head = 0; head < queue.length; head++) {
    for (const edge of [...queue[head].outEdges, ...queue[head].inEdges]) {
      for (const id of [edge.origin, edge.destination]) {
        const next = byId.get(id);
        if (next && !seen.has(id)) { seen.add(id); queue.push(next); }
      }
    }
  }
  return [...queue, ...nodes.filter((n) => !seen.has(n.id))];
}

// Positions: table level lays the cards out directly; column level lays out one box per dataset (as tall as its
// columns) and stacks the columns inside it, each dataset's in the order of the columns they come from.
function positions(nodes: GraphNode[]): Map<string, Point> {
  const ids = new Set(nodes.map((n) => n.id));
  const fields = nodes.filter((n) => n.type === "DATASET_FIELD");
  if (!fields.length) {
    const boxes: Box[] = nodes.map((n) => ({ id: n.id, ...CARD }));
    const links: Link[] = nodes.flatMap((n) => n.outEdges.filter((e) => ids.has(e.destination))
      .map((e) => ({ source: e.origin, target: e.destination })));
    return layered(boxes, links);
  }
  const groupOf = (n: GraphNode) => datasetId(n.data.namespace, n.data.dataset);
  const members = new Map<string, GraphNode[]>();
  for (const field of fields) members.set(groupOf(field), [...(members.get(groupOf(field)) ?? []), field]);
  const byId = new Map(fields.map((f) => [f.id, f]));
  const boxes: Box[] = [...members].map(([id, list]) => ({ id, width: FIELD.width + 16, height: GROUP_HEADER + list.length * (FIELD.height + 6) + 8 }));
  const links: Link[] = fields.flatMap((f) => f.outEdges.filter((e) => byId.has(e.destination))
    .map((e) => ({ source: groupOf(f), target: groupOf(byId.get(e.destination)!) })));
  const groups = layered(boxes, links, { layerGap: 120, nodeGap: 24 });
  const at = new Map<string, Point>();
  const heights = new Map(boxes.map((b) => [b.id, b.height]));
  for (const [group, list] of [...members].sort((a, b) => groups.get(a[0])!.x - groups.get(b[0])!.x)) {
    const from = (f: GraphNode) => {
      // its inputs: a column's inEdges point from it to them (Marquez's column-lineage convention)
      const ys = f.inEdges.map((e) => at.get(e.origin === f.id ? e.destination : e.origin)?.y)
        .filter((y): y is number => y !== undefined);
      return ys.length ? ys.reduce((a, b) => a + b, 0) / ys.length : Infinity;
    };
    const ordered = [...list].sort((a, b) => from(a) - from(b) || a.data.field.localeCompare(b.data.field));
    const centre = groups.get(group)!;
    const top = centre.y - heights.get(group)! / 2 + GROUP_HEADER;
    ordered.forEach((f, i) => at.set(f.id, { x: centre.x, y: top + i * (FIELD.height + 6) + FIELD.height / 2 }));
  }
  return at;
}

// Elements in chunks, nearest the start first; an edge goes with the later of its two ends. Edges come from outEdges
// only (a column's inEdges point from it to its inputs, Marquez's column-lineage convention).
function elements(nodes: GraphNode[], start: string, at: Map<string, Point>): cytoscape.ElementDefinition[][] {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const chunks: cytoscape.ElementDefinition[][] = [];
  const chunkOf = new Map<string, number>();
  const groups = new Set<string>();
  nearestFirst(nodes, start).forEach((node, i) => {
    const chunk = i < FIRST_CHUNK ? 0 : 1 + Math.floor((i - FIRST_CHUNK) / CHUNK);
    const into = (chunks[chunk] ??= []);
    chunkOf.set(node.id, chunk);
    const classes = [node.type === "JOB" ? "job" : node.type === "DATASET" ? "dataset" : "field"];
    const state = runState(node);
    if (state) classes.push(`state-${state}`);
    if (node.data.declaredOnly) classes.push("declared");
    if (node.id === start || (node.type === "DATASET_FIELD" && datasetId(node.data.namespace, node.data.dataset) === start)) {
      classes.push("start"); // a dataset's columns when the column view starts from the dataset
    }
    let parent: string | undefined;
    if (node.type === "DATASET_FIELD") {
      parent = `group:${datasetId(node.data.namespace, node.data.dataset)}`;
      if (!groups.has(parent)) {
        groups.add(parent);
        into.push({ data: { id: parent, label: shortName("dataset", node.data.dataset, 24) }, classes: "dataset-group" });
      }
    }
    into.push({ data: { id: node.id, label: card(node), parent }, classes: classes.join(" "), position: { ...at.get(node.id)! } });
  });
  const seen = new Set<string>();
  for (const node of nodes) {
    for (const edge of node.outEdges) {
      const key = `${edge.origin}->${edge.destination}`;
      const target = byId.get(edge.destination);
      if (!target || seen.has(key)) continue;
      seen.add(key);
      const input = target.data.inputFields?.find((f: any) => `datasetField:${f.namespace}:${f.dataset}:${f.field}` === edge.origin);
      const kind = input ? (input.transformationType === "INDIRECT" ? "indirect labelled" : "labelled")
        : node.type === "JOB" ? "write" : "read";
      const text = input ? [input.transformationType, input.transformationDescription].filter(Boolean).join(": ") : "";
      chunks[Math.max(chunkOf.get(edge.origin)!, chunkOf.get(edge.destination)!)]
        .push({ data: { id: key, source: edge.origin, target: edge.destination, label: text }, classes: kind });
    }
  }
  return chunks;
}

// Draws the nodes (already filtered to the view), resolving when every chunk is on the canvas.
export async function drawGraph(container: HTMLElement, nodes: GraphNode[], start: string, on: Handlers): Promise<void> {
  const run = ++drawing;
  release(container);
  const large = nodes.length > LARGE;
  const at = positions(nodes);
  const chunks = elements(nodes, start, at);
  cy = cytoscape({ container, elements: chunks[0] ?? [], style: STYLE, wheelSensitivity: 0.3, layout: { name: "preset" },
    textureOnViewport: large, hideEdgesOnViewport: large, motionBlur: false, minZoom: 0.02, maxZoom: 3 });
  const graph = cy;
  graph.on("tap", "node", (event) => {
    const id = event.target.id() as string;
    if (id.startsWith("group:")) return;
    if ((event.originalEvent as MouseEvent)?.shiftKey) on.path(id);
    else on.select(id);
  });
  graph.on("dbltap", "node", (event) => {
    const id = event.target.id() as string;
    if (!id.startsWith("group:")) on.open(id);
  });
  graph.on("mouseover", "edge.labelled", (event) => event.target.addClass("hover"));
  graph.on("mouseout", "edge.labelled", (event) => event.target.removeClass("hover"));
  tooltip(graph, container, new Map(nodes.map((n) => [n.id, n])));
  const whole = frame(graph, start, nodes.length);
  document.body.dataset.renderedAt = String(performance.now()); // lineage bench api: time to first render
  for (const rest of chunks.slice(1)) {
    await new Promise((resolve) => requestAnimationFrame(resolve));
    if (run !== drawing) return;
    graph.add(rest);
  }
  minimap(graph, container, !whole);
  keyboard(graph, container, on);
  document.body.dataset.drawnAt = String(performance.now());
  document.body.dataset.graphNodes = String(graph.nodes().not(".dataset-group").length);
}

export function clearGraph(container: HTMLElement): void {
  drawing++;
  release(container);
  cy = undefined;
  document.body.dataset.graphNodes = "0";
}

// The last graph and what drove it (keys, minimap) gone: nothing acts on a graph no longer shown.
function release(container: HTMLElement): void {
  cy?.destroy();
  container.onkeydown = null;
  const map = container.parentElement?.querySelector<HTMLCanvasElement>("canvas.minimap");
  if (map) { map.hidden = true; map.onclick = null; }
}

// The first view: the whole graph when it fits at a readable size, else the start and its neighbourhood at one (the
// minimap shows the rest). Answers whether everything is in view.
const READABLE = 0.7;

function frame(graph: cytoscape.Core, start: string, total: number): boolean {
  if (total <= MINIMAP_FROM) {
    graph.fit(undefined, 30);
    if (graph.zoom() >= READABLE) return true;
  }
  // the start node, or (column view of a dataset) the start dataset's columns
  const node = graph.getElementById(start);
  const focus = node.nonempty() ? node : graph.nodes(".start");
  const near = focus.nonempty() ? focus.closedNeighborhood().closedNeighborhood() : graph.nodes();
  graph.fit(near, 40);
  if (graph.zoom() > 1 || graph.zoom() < READABLE) {
    graph.zoom(graph.zoom() > 1 ? 1 : READABLE);
    graph.center(focus.nonempty() ? focus : undefined);
  }
  return false;
}

function tooltip(graph: cytoscape.Core, container: HTMLElement, byId: Map<string, GraphNode>): void {
  const tip = container.parentElement!.querySelector<HTMLElement>(".graph-tip")!;
  graph.on("mouseover", "node", (event) => {
    const node = byId.get(event.target.id());
    if (!node) return;
    const ref = parseNodeId(node.id);
    const state = runState(node);
    tip.textContent = `${ref.kind === "datasetField" ? "column" : ref.kind} ${ref.name}${ref.field ? `.${ref.field}` : ""}\n${ref.namespace}` +
      (state ? `\nlatest run: ${state}` : "") +
      (node.data.declaredOnly ? "\ndeclared output only: no completed run has written it" : "");
    const { x, y } = event.renderedPosition;
    tip.style.left = `${x + 14}px`;
    tip.style.top = `${y + 14}px`;
    tip.hidden = false;
  });
  graph.on("mouseout", "node", () => { tip.hidden = true; });
  graph.on("viewport", () => { tip.hidden = true; });
}

// A small overview of the whole graph with the visible part outlined; a click there moves the view.
function minimap(graph: cytoscape.Core, container: HTMLElement, wanted: boolean): void {
  const map = container.parentElement!.querySelector<HTMLCanvasElement>("canvas.minimap")!;
  map.hidden = !wanted;
  if (!wanted) return;
  const context = map.getContext("2d")!;
  const box = graph.elements().boundingBox({});
  const scale = Math.min(map.width / (box.w || 1), map.height / (box.h || 1));
  const left = (map.width - box.w * scale) / 2, top = (map.height - box.h * scale) / 2; // centred
  const toMap = (x: number, y: number) => [left + (x - box.x1) * scale, top + (y - box.y1) * scale];
  const nodes = graph.nodes().not(".dataset-group").map((n) => ({ p: (n as cytoscape.NodeSingular).position(), failed: n.hasClass("state-FAILED"), start: n.hasClass("start") }));
  let queued = false;
  const paint = () => {
    queued = false;
    context.clearRect(0, 0, map.width, map.height);
    for (const node of nodes) {
      const [x, y] = toMap(node.p.x, node.p.y);
      context.fillStyle = node.start ? "#2563eb" : node.failed ? COLOURS.FAILED : "#94a3b8";
      context.fillRect(x - 1.5, y - 1, 3, 2);
    }
    const view = graph.extent();
    const [x1, y1] = toMap(view.x1, view.y1), [x2, y2] = toMap(view.x2, view.y2);
    context.strokeStyle = "#2563eb";
    context.lineWidth = 1.5;
    context.strokeRect(x1, y1, x2 - x1, y2 - y1);
  };
  graph.on("viewport", () => { if (!queued) { queued = true; requestAnimationFrame(paint); } });
  map.onclick = (event) => {
    const rect = map.getBoundingClientRect();
    const x = box.x1 + (event.clientX - rect.left - left) / scale, y = box.y1 + (event.clientY - rect.top - top) / scale;
    graph.pan({ x: graph.width() / 2 - x * graph.zoom(), y: graph.height() / 2 - y * graph.zoom() });
  };
  paint();
}

// Arrow keys walk the graph: right/left to a node downstream/upstream, up/down to the one above/below in the same
// column; Enter opens its page, +/- zoom, 0 fits.
const at = (element: cytoscape.SingularElementArgument) => (element as cytoscape.NodeSingular).position();

function keyboard(graph: cytoscape.Core, container: HTMLElement, on: Handlers): void {
  container.onkeydown = (event) => {
    const current = graph.nodes(":selected").not(".dataset-group").first() as cytoscape.NodeSingular;
    const from = current.nonempty() ? current : graph.nodes(".start").not(".dataset-group").first() as cytoscape.NodeSingular;
    if (from.empty()) return;
    let next: cytoscape.NodeSingular | undefined;
    const nearest = (list: cytoscape.NodeCollection) => list.not(".dataset-group").sort((a, b) =>
      Math.abs(at(a).y - from.position().y) - Math.abs(at(b).y - from.position().y)).first() as cytoscape.NodeSingular;
    if (event.key === "ArrowRight") next = nearest(from.outgoers("node"));
    else if (event.key === "ArrowLeft") next = nearest(from.incomers("node"));
    else if (event.key === "ArrowUp" || event.key === "ArrowDown") {
      const sign = event.key === "ArrowUp" ? -1 : 1;
      const column = graph.nodes().not(".dataset-group").filter((n) => Math.abs(at(n).x - from.position().x) < 1 &&
        sign * (at(n).y - from.position().y) > 0);
      next = column.sort((a, b) => sign * (at(a).y - at(b).y)).first() as cytoscape.NodeSingular;
    } else if (event.key === "Enter" && from.nonempty()) { on.open(from.id()); return; }
    else if (event.key === "+" || event.key === "=") zoomBy(1.25);
    else if (event.key === "-") zoomBy(0.8);
    else if (event.key === "0") graph.fit(undefined, 30);
    else return;
    event.preventDefault();
    if (next?.nonempty()) {
      graph.nodes(":selected").unselect();
      next.select();
      const pos = next.renderedPosition();
      if (pos.x < 0 || pos.y < 0 || pos.x > graph.width() || pos.y > graph.height()) graph.center(next);
      on.select(next.id());
    }
  };
}

export function zoomBy(factor: number): void {
  if (!cy) return;
  cy.zoom({ level: cy.zoom() * factor, renderedPosition: { x: cy.width() / 2, y: cy.height() / 2 } });
}

export function fit(): void {
  cy?.fit(undefined, 30);
}
