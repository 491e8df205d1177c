// The lineage server's web UI: the home page (what needs attention), search, the lineage graph (table or column level,
// as of a time), dataset and job pages, and the operator view (live drift alerts, dead letters, pipeline status). It
// reads only the server's API.
import { api, call, datasetId, headers, html, lineageLink, type NodeRef, parseNodeId, seg } from "./api";
import { type Edge, type GraphNode, label, RUN_STATE_NAMES, runState } from "./nodes";
import { showDatasets, showJobs } from "./browse";
import { showHome } from "./home";
import { partitionGrid } from "./partitions";
import { seconds, type TimedRun, timeline } from "./runs";
import { diffTable } from "./schema";
import "./style.css";

type Direction = "both" | "up" | "down";
type View = { node?: string; depth: number; dir: Direction; columns: boolean; asOf?: string };

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;
// --- the view in the URL (shareable) --------------------------------------------------------------------------------
function readView(): { route: string; view: View } {
  const [route, query = ""] = location.hash.replace(/^#\/?/, "").split("?");
  const params = new URLSearchParams(query);
  return {
    route: route || "home",
    view: {
      node: params.get("node") || undefined,
      depth: Math.max(1, Math.min(20, Number(params.get("depth")) || 3)),
      dir: (["both", "up", "down"].includes(params.get("dir") || "") ? params.get("dir") : "both") as Direction,
      columns: params.get("columns") === "1",
      asOf: params.get("asOf") || undefined,
    },
  };
}

function writeView(view: View): void {
  const params = new URLSearchParams();
  if (view.node) params.set("node", view.node);
  params.set("depth", String(view.depth));
  params.set("dir", view.dir);
  if (view.columns) params.set("columns", "1");
  if (view.asOf) params.set("asOf", view.asOf);
  location.hash = `#/lineage?${params}`;
}

// --- search with type-ahead -----------------------------------------------------------------------------------------
let searchTimer: number | undefined;
let searchSeq = 0;

function setupSearch(): void {
  const input = $<HTMLInputElement>("search");
  const results = $("results");
  // Ctrl+K / ⌘K or "/" anywhere (but in a field) goes to the search box
  document.addEventListener("keydown", (event) => {
    const typing = event.target instanceof HTMLInputElement || event.target instanceof HTMLSelectElement;
    if (((event.ctrlKey || event.metaKey) && event.key.toLowerCase() === "k") || (event.key === "/" && !typing)) {
      event.preventDefault();
      input.focus();
    }
  });
  input.addEventListener("input", () => {
    window.clearTimeout(searchTimer);
    searchTimer = window.setTimeout(() => runSearch(input.value.trim()), 120);
  });
  input.addEventListener("keydown", (event) => {
    const buttons = [...results.querySelectorAll("button")];
    if (event.key === "ArrowDown" && buttons.length) { event.preventDefault(); (buttons[0] as HTMLElement).focus(); }
    if (event.key === "Escape") results.replaceChildren();
  });
  results.addEventListener("keydown", (event) => {
    const buttons = [...results.querySelectorAll("button")];
    const at = buttons.indexOf(document.activeElement as HTMLButtonElement);
    if (event.key === "ArrowDown" && at < buttons.length - 1) { event.preventDefault(); buttons[at + 1].focus(); }
    if (event.key === "ArrowUp") { event.preventDefault(); (at > 0 ? buttons[at - 1] : input).focus(); }
    if (event.key === "Escape") { results.replaceChildren(); input.focus(); }
  });
}

async function runSearch(q: string): Promise<void> {
  const results = $("results");
  const seq = ++searchSeq;
  if (!q) { results.replaceChildren(); return; }
  const found = await api("/api/v2/search", { q, limit: 12 }).catch(() => ({ results: [] }));
  if (seq !== searchSeq) return; // a later keystroke's answer wins
  results.replaceChildren(...found.results.map((hit: any) => {
    const item = document.createElement("li");
    item.setAttribute("role", "option");
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.nodeId = hit.nodeId;
    button.innerHTML = html`<span class="kind">${hit.kind === "field" ? "column" : hit.kind}</span>`;
    const title = hit.kind === "field" ? `${hit.name} . ${hit.field}` : hit.name;
    button.append(`${title}  `, Object.assign(document.createElement("span"), { className: "small", textContent: hit.namespace }));
    button.addEventListener("click", () => {
      results.replaceChildren();
      $<HTMLInputElement>("search").value = "";
      // a column opens the column-level graph around it; a dataset or job keeps the current level
      const view = readView().view;
      writeView({ ...view, node: hit.nodeId, columns: hit.kind === "field" ? true : view.columns && hit.kind === "dataset" });
    });
    item.append(button);
    return item;
  }));
}

// --- the lineage graph ----------------------------------------------------------------------------------------------
// The canvas (Cytoscape, most of the bundle) loads with the first graph: the home page does not wait for it.
let loadedCanvas: typeof import("./graph") | undefined;
async function canvasModule(): Promise<typeof import("./graph")> {
  loadedCanvas ??= await import("./graph");
  return loadedCanvas;
}
let shown: Map<string, GraphNode> = new Map();
let pathEnds: string[] = [];

// The nodes reachable from the start along the data flow (down), against it (up), or all of them (both).
function directed(nodes: GraphNode[], start: string, dir: Direction): GraphNode[] {
  if (dir === "both") return nodes;
  const next = new Map<string, string[]>();
  for (const node of nodes) {
    for (const edge of node.outEdges) {
      const [from, to] = dir === "down" ? [edge.origin, edge.destination] : [edge.destination, edge.origin];
      const list = next.get(from);
      if (list) list.push(to); else next.set(from, [to]);
    }
  }
  const starts = nodes.filter((n) => n.id === start || (n.type === "DATASET_FIELD" && datasetId(n.data.namespace, n.data.dataset) === start));
  const seen = new Set(starts.map((n) => n.id));
  const queue = [...seen];
  for (let head = 0; head < queue.length; head++) for (const to of next.get(queue[head]) ?? []) if (!seen.has(to)) { seen.add(to); queue.push(to); }
  return nodes.filter((n) => seen.has(n.id));
}

async function draw(nodes: GraphNode[], start: string): Promise<void> {
  shown = new Map(nodes.map((n) => [n.id, n]));
  pathEnds = [];
  renderNodeList();
  await (await canvasModule()).drawGraph($("graph"), nodes, start, {
    select: (id) => showDetails(id),
    open: (id) => writeView({ ...readView().view, node: id.startsWith("datasetField:") ? fieldDataset(id) : id }),
    path: markPath,
  });
}

function fieldDataset(id: string): string {
  const ref = parseNodeId(id);
  return datasetId(ref.namespace, ref.name);
}

// Shift-click two nodes: the path between them, highlighted.
async function markPath(id: string): Promise<void> {
  const cy = (await canvasModule()).canvas();
  if (!cy) return;
  pathEnds = [...pathEnds, id].slice(-2);
  cy.elements().removeClass("on-path");
  if (pathEnds.length < 2) { notice(`path from ${parseNodeId(id).name}: shift-click another node`); return; }
  const found = cy.elements().aStar({ root: cy.getElementById(pathEnds[0]), goal: cy.getElementById(pathEnds[1]), directed: false });
  if (found.found) { found.path.addClass("on-path"); notice(`path: ${found.path.nodes().length} nodes`); }
  else notice("no path between them in this view");
}

function renderNodeList(): void {
  const list = $("node-list");
  list.replaceChildren(...[...shown.values()].sort((a, b) => a.id.localeCompare(b.id)).map((node) => {
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.nodeId = node.id;
    const state = runState(node);
    button.textContent = `${node.type.toLowerCase().replace("dataset_field", "column")}: ${label(node)}${state ? ` (${state})` : ""}`;
    button.addEventListener("click", () => showDetails(node.id));
    item.append(button);
    return item;
  }));
}

function notice(text: string): void {
  $("notice").textContent = text;
}

let lineageSeq = 0;

async function showLineage(view: View): Promise<void> {
  const seq = ++lineageSeq;
  syncControls(view);
  if (!view.node) return;
  const start = parseNodeId(view.node);
  $("start-name").textContent = `${start.kind} ${start.name}`;
  notice("");
  try {
    let response: Response;
    if (view.columns) {
      if (start.kind === "job") { notice("columns: choose a dataset or a column"); return; }
      response = await call("/api/v1/column-lineage", { nodeId: view.node, depth: view.depth, withDownstream: true, asOf: view.asOf });
    } else {
      response = await call("/api/v1/lineage", { nodeId: view.node, depth: view.depth, asOf: view.asOf });
    }
    const body = await response.json();
    if (seq !== lineageSeq) return; // the view changed while this answer was on its way: the later one draws
    if (!response.ok) { notice(body.message); (await canvasModule()).clearGraph($("graph")); shown = new Map(); renderNodeList(); return; }
    const nodes = directed(body.graph, view.node, view.dir);
    if (response.headers.get("X-Lineage-Truncated") === "true") notice("more lineage exists than shown (limits)");
    else if (nodes.length > 200) notice(`${nodes.length} nodes: arrow keys walk the graph, the minimap moves the view`);
    await draw(nodes, view.node);
    if (seq !== lineageSeq) return; // a later view was drawn meanwhile: its page stays in the panel
    showDetails(view.node);
  } catch (error) {
    notice(String(error));
  }
}

// Merge a node's own neighbourhood (depth 1) into the graph on screen.
async function expand(id: string): Promise<void> {
  const view = readView().view;
  const body = await api("/api/v1/lineage", { nodeId: id, depth: 1, asOf: view.asOf });
  for (const node of body.graph as GraphNode[]) {
    const known = shown.get(node.id);
    if (known) {
      const key = (e: Edge) => `${e.origin}->${e.destination}`;
      const have = new Set([...known.outEdges, ...known.inEdges].map(key));
      known.outEdges.push(...node.outEdges.filter((e) => !have.has(key(e))));
      known.inEdges.push(...node.inEdges.filter((e) => !have.has(key(e))));
    } else shown.set(node.id, node);
  }
  await draw([...shown.values()], view.node ?? id);
  notice(`expanded ${parseNodeId(id).name}`);
  await showDetails(id); // its readers and writers now include the new neighbours
}

// Hide what hangs off this node: every node the start reaches only through it.
async function collapse(id: string): Promise<void> {
  const start = readView().view.node ?? id;
  const reached = new Set([start]);
  const queue = [start];
  while (queue.length) {
    const node = shown.get(queue.shift()!);
    if (!node || node.id === id) continue;
    for (const other of [...node.inEdges.map((e) => e.origin), ...node.outEdges.map((e) => e.destination)]) {
      if (shown.has(other) && !reached.has(other)) { reached.add(other); queue.push(other); }
    }
  }
  const hidden = new Set([...shown.keys()].filter((other) => !reached.has(other)));
  const kept = [...shown.values()].filter((node) => !hidden.has(node.id));
  await draw(kept, start);
  notice(hidden.size ? `collapsed ${hidden.size} nodes next to ${parseNodeId(id).name}` : "nothing only this node leads to");
}

// --- details: dataset, job, column pages ----------------------------------------------------------------------------

function neighbours(id: string): { from: GraphNode[]; to: GraphNode[] } {
  const node = shown.get(id);
  if (!node) return { from: [], to: [] };
  const pick = (ids: string[]) => ids.map((i) => shown.get(i)).filter(Boolean) as GraphNode[];
  return { from: pick(node.inEdges.map((e) => e.origin)), to: pick(node.outEdges.map((e) => e.destination)) };
}

function actions(id: string): HTMLElement {
  const bar = document.createElement("p");
  const recentre = ["Re-centre", () => writeView({ ...readView().view, node: id })] as const;
  // expand and collapse work on the table-level graph (the column view has columns, not these nodes)
  const choices = readView().view.columns ? [recentre]
    : [["Expand", () => expand(id)] as const, ["Collapse", () => collapse(id)] as const, recentre];
  for (const [text, run] of choices) {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = text;
    button.addEventListener("click", run);
    bar.append(button, " ");
  }
  return bar;
}

let detailsSeq = 0;

async function showDetails(id: string): Promise<void> {
  const panel = $("details");
  const ref = parseNodeId(id);
  const seq = ++detailsSeq;
  const stale = () => seq !== detailsSeq; // a later click's page wins
  panel.innerHTML = html`<h2>${ref.kind === "datasetField" ? `${ref.name} . ${ref.field}` : ref.name}</h2><p class="small">${ref.namespace}</p>`;
  panel.dataset.nodeId = id;
  try {
    if (ref.kind === "dataset") await datasetPage(panel, ref, id, stale);
    else if (ref.kind === "job") await jobPage(panel, ref, id, stale);
    else fieldPage(panel, id);
  } catch (error) {
    if (!stale()) panel.insertAdjacentHTML("beforeend", html`<p class="state-FAILED">${String(error)}</p>`);
  }
}

async function datasetPage(panel: HTMLElement, ref: NodeRef, id: string, stale: () => boolean): Promise<void> {
  const [dataset, schema, runs, sensitive, partitions] = await Promise.all([
    api(`/api/v1/namespaces/${seg(ref.namespace)}/datasets/${seg(ref.name)}`),
    api(`/api/v2/datasets/${seg(ref.namespace)}/${seg(ref.name)}/schema`),
    api(`/api/v2/datasets/${seg(ref.namespace)}/${seg(ref.name)}/runs`, { limit: 50 }),
    api(`/api/v2/datasets/${seg(ref.namespace)}/${seg(ref.name)}/sensitive`).catch(() => ({ columns: [] })),
    api(`/api/v2/datasets/${seg(ref.namespace)}/${seg(ref.name)}/partitions`, { limit: 1000 }).catch(() => ({ partitions: [] })),
  ]);
  if (stale()) return;
  panel.append(actions(id));
  const { from, to } = neighbours(id);
  const jobs = (list: GraphNode[]) => list.map((j) => html`<li>${j.data.name} <span class="state-${runState(j)}">${runState(j) ?? ""}</span></li>`).join("");
  const counted = runs.writes.filter((w: any) => w.rowCount != null).reverse();
  const quality = runs.quality.slice(0, 5).map((q: any) =>
    html`<li>${q.endTime ?? ""}: ${q.dataQuality?.rowCount ?? "?"} rows` +
    Object.entries(q.dataQuality?.columnMetrics ?? {}).map(([column, m]: [string, any]) =>
      html`, ${column} nulls ${m.nullCount ?? "?"}`).join("") +
    (q.assertions ?? []).map((a: any) =>
      html`, <span class="${a.success ? "assert-pass" : "state-FAILED"}">${a.assertion}${a.column ? ` (${a.column})` : ""} ${a.success ? "passed" : "failed"}</span>`).join("") +
    "</li>").join("");
  panel.insertAdjacentHTML("beforeend", about(dataset) +
    html`<p>last written: ${dataset.lastModifiedAt ?? "never by a completed run"}</p>` +
    `<h3>Rows written</h3>${sparkline(counted.map((w: any) => w.rowCount))}` +
    `<h3>Data quality (as read)</h3><ul>${quality || "<li class=hint>no metrics</li>"}</ul>` +
    (partitions.partitions.length ? `<h3>Partitions</h3>${partitionGrid(partitions.partitions)}` +
      `<ul class="partition-attention">${partitions.partitions.filter((p: any) => p.state === "FAILED" || p.state === "STALE").slice(0, 10)
        .map((p: any) => html`<li><button type="button" class="partition" data-key="${p.key}">${p.key}</button> <span class="state-${p.state}">${p.state}</span></li>`).join("")}</ul>` +
      `<div id="partition-detail"></div>` + backfillForm(partitions.partitions) : "") +
    `<h3>Written by</h3><ul>${jobs(from) || "<li class=hint>none in view</li>"}</ul>` +
    `<h3>Read by</h3><ul>${jobs(to) || "<li class=hint>none in view</li>"}</ul>` +
    `<h3>Schema</h3><table><tr><th>field</th><th>type</th><th>tags</th></tr>` +
    dataset.fields.map((f: any) => html`<tr><td>${f.name}</td><td>${f.type}</td>` +
      `<td>${tagBadges(sensitive.columns.filter((c: any) => c.field === f.name))}</td></tr>`).join("") + `</table>` +
    untypedTags(sensitive.columns, dataset.fields) +
    `<h3>Schema history</h3><ol class="versions">` +
    schema.versions.map((v: any) => html`<li>${v.firstSeen} <code>${v.version.slice(0, 10)}</code>${v.current ? " (current)" : ""}` +
      (v.changes.length ? `<ul>${v.changes.map((c: any) => html`<li class="change-${c.severity}">${c.kind} ${c.path}: ${c.oldType ?? "-"} → ${c.newType ?? "-"}</li>`).join("")}</ul>` : "") +
      "</li>").join("") + `</ol>` +
    (schema.versions.length > 1 ? `<h3>Compare versions</h3><div class="compare">` +
      `<label>before <select id="diff-before">${versionOptions(schema.versions, schema.versions.length - 2)}</select></label> ` +
      `<label>after <select id="diff-after">${versionOptions(schema.versions, schema.versions.length - 1)}</select></label></div>` +
      `<div id="schema-diff"></div>` : "") +
    `<h3>Drift alerts</h3><ul id="dataset-alerts">` +
    (schema.alerts.map((a: any) => a.kind === "sensitiveExposure" && a.exposure
      ? html`<li class="exposure">${a.eventTime}: ${a.exposure.tag} newly reaches ${exposedFields(a)} (not cleared)</li>`
      : html`<li class="change-${a.severity}">${a.eventTime}: ${a.changes.length} changes, ${a.impactedJobs.length} jobs downstream</li>`).join("") || "<li class=hint>none</li>") + `</ul>`);
  wirePartitions(panel, partitions.partitions, ref);
  if (schema.versions.length > 1) {
    const compare = () => {
      const before = schema.versions[Number($<HTMLSelectElement>("diff-before").value)];
      const after = schema.versions[Number($<HTMLSelectElement>("diff-after").value)];
      const alert = schema.alerts.find((a: any) => a.newVersion === after.version && a.kind !== "sensitiveExposure");
      $("schema-diff").innerHTML = diffTable(before, after, alert);
    };
    $("diff-before").addEventListener("change", compare);
    $("diff-after").addEventListener("change", compare);
    compare();
  }
}

function versionOptions(versions: any[], selected: number): string {
  return versions.map((v: any, i: number) => html`<option value="${i}"${i === selected ? " selected" : ""}>` +
    html`${v.firstSeen ?? "?"} ${v.version.slice(0, 10)}</option>`).join("");
}

// One partition: its state and why, the run that wrote its current version, and the partitions that run read.
function partitionDetail(partitions: any[], keys: string[]): void {
  const chosen = partitions.filter((p) => keys.includes(p.key));
  $("partition-detail").innerHTML = chosen.map((p) => html`<h4>${p.key} <span class="state-${p.state}">${p.state ?? "not written"}</span></h4>` +
    (p.reason ? html`<p class="small">${p.reason}</p>` : "") +
    (p.latest ? html`<p>version ${p.latest.version} by ${p.latest.job?.name ?? "?"} (run ${p.latest.runId}), ${p.latest.rowCount ?? "?"} rows, ${p.latest.endTime ?? "not ended"}</p>` : "") +
    (p.upstream.length ? `<p>built from</p><ul>${p.upstream.map((u: any) => html`<li>${u.name} ${u.key}</li>`).join("")}</ul>` : "")).join("");
}

// Sensitive tags on a column (GET …/sensitive): tagged here, derived (with the origin and the path on hover), or
// stopped by a masking hop; a dataset not cleared for a derived tag is flagged.
function tagBadges(columns: any[]): string {
  return columns.map((c: any) => {
    const origin = `${c.origin.name}.${c.origin.field}`;
    const path = [origin, ...c.path.map((h: any) => `${h.name}.${h.field}${h.transformation ? ` (${h.transformation})` : ""}`)].join(" → ");
    const what = c.status === "origin" ? "tagged here" : c.status === "masked" ? `masked: stops here (from ${origin})`
      : `derived from ${origin}${c.cleared ? "" : ", dataset not cleared"}`;
    return html`<span class="tag tag-${c.status}${c.status === "derived" && !c.cleared ? " tag-uncleared" : ""}" title="${path}">${c.tag}: ${what}</span> `;
  }).join("");
}

// Tagged columns the schema does not list (a partial dbt schema, a column known from column lineage only).
function untypedTags(columns: any[], fields: any[]): string {
  const listed = new Set(fields.map((f: any) => f.name));
  const others = columns.filter((c: any) => !listed.has(c.field));
  return others.length ? `<p class="small">Other tagged columns: ${others.map((c: any) => html`${c.field} ` + tagBadges([c])).join("")}</p>` : "";
}

// A job's or dataset's description, tags and facet documents (each facet's JSON folded under its name).
function about(item: any): string {
  const facets = Object.entries(item.facets ?? {}).filter(([key]) => key !== "_omitted");
  return (item.description ? html`<p class="description">${item.description}</p>` : "") +
    (item.tags?.length ? `<p class="tags">${item.tags.map((t: string) => html`<span class="tag">${t}</span>`).join(" ")}</p>` : "") +
    (facets.length ? `<h3>Facets</h3><div class="facets">` + facets.map(([key, value]) =>
      html`<details><summary>${key}</summary><pre>${JSON.stringify(value, null, 2)}</pre></details>`).join("") + "</div>" : "");
}

// Row counts over the latest writes, oldest first, as a small line.
function sparkline(values: number[]): string {
  if (!values.length) return `<p class="hint">no row counts</p>`;
  const max = Math.max(...values), min = Math.min(...values), width = 300, height = 40;
  const x = (i: number) => (values.length === 1 ? width / 2 : (i * width) / (values.length - 1));
  const y = (v: number) => height - 4 - ((v - min) / (max - min || 1)) * (height - 8);
  const points = values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
  return `<svg class="sparkline" width="${width}" height="${height}" role="img" aria-label="rows written: ${values.join(", ")}">` +
    `<polyline fill="none" stroke="#2563eb" stroke-width="2" points="${points}"/></svg>` +
    html`<p class="small">last ${values[values.length - 1]} rows; min ${min}, max ${max} over ${values.length} writes</p>`;
}

// A backfill plan from this dataset's partitions of some days: the downstream work in stages (each runs after the
// stages before it; items of one stage can run in parallel).
function backfillForm(partitions: any[]): string {
  const days = partitions.map((p: any) => /\d{4}-\d{2}-\d{2}/.exec(p.key)?.[0]).filter(Boolean).sort() as string[];
  if (!days.length) return "";
  const failed = partitions.filter((p: any) => p.state === "FAILED" || p.state === "STALE")
    .map((p: any) => /\d{4}-\d{2}-\d{2}/.exec(p.key)?.[0]).filter(Boolean).sort() as string[];
  const from = failed[0] ?? days[days.length - 1], to = failed[failed.length - 1] ?? from;
  return `<h3>Backfill plan</h3><form class="backfill"><label>from <input type="date" name="from" value="${from}"></label> ` +
    `<label>to <input type="date" name="to" value="${to}"></label> <button type="submit">Plan</button></form><div id="backfill-plan"></div>`;
}

async function showBackfill(ref: NodeRef, from: string, to: string): Promise<void> {
  const target = $("backfill-plan");
  try {
    const plan = await api(`/api/v2/datasets/${seg(ref.namespace)}/${seg(ref.name)}/backfill-plan`, { from, to });
    const item = (i: any) => html`<li class="plan-item"><span class="state-${i.lastRun?.state ?? ""}">${label({ id: "", type: "JOB", data: i.job, inEdges: [], outEdges: [] })}</span>` +
      html` <span class="small">${i.key}${i.derivation === "window" ? " (window)" : ""}</span></li>`;
    target.innerHTML = html`<p class="small">${plan.itemCount} items over ${plan.jobs.length} jobs in ${plan.stages.length} stages` +
      `${plan.truncated ? " (cut at the depth limit)" : ""}${plan.cycles.length ? `; ${plan.cycles.length} job cycles` : ""}</p>` +
      `<ol class="stages">${plan.stages.map((stage: any) => `<li class="stage"><b>stage ${stage.stage + 1}</b><ul>` +
        stage.items.map(item).join("") + `</ul></li>`).join("")}</ol>`;
  } catch (error) {
    target.innerHTML = html`<p class="state-FAILED">${String(error)}</p>`;
  }
}

function wirePartitions(panel: HTMLElement, partitions: any[], ref: NodeRef): void {
  panel.querySelector<HTMLFormElement>("form.backfill")?.addEventListener("submit", (event) => {
    event.preventDefault();
    const form = new FormData(event.target as HTMLFormElement);
    showBackfill(ref, String(form.get("from")), String(form.get("to")));
  });
  panel.querySelectorAll<SVGRectElement>("rect.partition-cell").forEach((cell) =>
    cell.addEventListener("click", () => partitionDetail(partitions, (cell.dataset.keys ?? "").split("\n"))));
  panel.querySelectorAll<HTMLButtonElement>("button.partition").forEach((button) =>
    button.addEventListener("click", () => partitionDetail(partitions, [button.dataset.key!])));
}

async function jobPage(panel: HTMLElement, ref: NodeRef, id: string, stale: () => boolean): Promise<void> {
  const path = `${seg(ref.namespace)}/jobs/${seg(ref.name)}`;
  const [job, timed] = await Promise.all([
    api(`/api/v1/namespaces/${path}`),
    api(`/api/v2/jobs/${seg(ref.namespace)}/${seg(ref.name)}/runs`, { limit: 100 }),
  ]);
  if (stale()) return;
  panel.append(actions(id));
  const names = (list: any[]) => list.map((d) => html`<li>${d.name} <span class="small">${d.namespace}</span></li>`).join("");
  const failed = timed.runs.filter((r: TimedRun) => r.state === "FAIL" || r.state === "ABORT").slice(0, 5);
  panel.insertAdjacentHTML("beforeend", about(job) + `<h3>Inputs</h3><ul>${names(job.inputs)}</ul><h3>Outputs</h3><ul>${names(job.outputs)}</ul>` +
    `<h3>Runs over time</h3><div class="run-timeline">${timeline(timed.runs)}</div>` +
    (failed.length ? `<h3>Failed runs</h3><ul class="failed-runs">` + failed.map((r: TimedRun) =>
      html`<li><button type="button" class="run" data-run="${r.runId}">${r.startTime ?? r.endTime ?? "?"}</button> ` +
      html`<span class="state-FAILED">${r.errorMessage ?? r.state}</span></li>`).join("") + `</ul>` : "") +
    `<h3>Runs</h3><table class="runs"><tr><th>started</th><th>state</th><th>duration</th></tr>` +
    timed.runs.slice(0, 25).map((r: TimedRun) => {
      const state = RUN_STATE_NAMES[r.state] ?? "NEW";
      return html`<tr><td><button type="button" class="run" data-run="${r.runId}">${r.startTime ?? r.lastEventTime ?? "?"}</button></td>` +
        html`<td class="state-${state}">${state}</td><td>${seconds(r.durationMs)}</td></tr>`;
    }).join("") +
    `</table><div id="run-detail"></div>`);
  panel.querySelectorAll<HTMLElement>("button.run, rect.run-bar").forEach((element) =>
    element.addEventListener("click", () => runDetail(element.dataset.run!)));
}

// A run: state and error, what it read and wrote (rows, the schema version then), the partitions it wrote and read
// with their state, its parent and children, its facets.
async function runDetail(runId: string): Promise<void> {
  const [detail, versions, partitions] = await Promise.all([
    api(`/api/v2/runs/${seg(runId)}`),
    api(`/api/v1/jobs/runs/${seg(runId)}`).catch(() => ({ inputDatasetVersions: [], outputDatasetVersions: [] })),
    api(`/api/v2/runs/${seg(runId)}/partitions`).catch(() => ({ wrote: [], read: [] })),
  ]);
  const run = detail.run;
  const versionOf = (list: any[], d: any) => list.find((v: any) => v.datasetVersionId.namespace === d.namespace &&
    v.datasetVersionId.name === d.name)?.datasetVersionId.version;
  const rows = (list: any[], known: any[]) => list.map((d) => html`<li>${d.name}: ${d.rowCount ?? "?"} rows` +
    (versionOf(known, d) ? html` <span class="small">schema ${String(versionOf(known, d)).slice(0, 10)}</span>` : "") + "</li>").join("");
  const parts = (list: any[]) => list.map((p: any) => html`<li>${p.name ?? p.dataset?.name ?? ""} ${p.key ?? p.partition ?? ""} ` +
    html`<span class="state-${p.state}">${p.state ?? ""}</span></li>`).join("");
  $("run-detail").innerHTML = html`<h3>Run ${runId}</h3><p class="state-${run.state}">${run.state}${run.errorMessage ? `: ${run.errorMessage}` : ""}</p>` +
    html`<p class="small">${run.startTime ?? "?"} → ${run.endTime ?? "not ended"}</p>` +
    `<p>read</p><ul>${rows(detail.inputs, versions.inputDatasetVersions)}</ul><p>wrote</p><ul>${rows(detail.outputs, versions.outputDatasetVersions)}</ul>` +
    (partitions.wrote.length ? `<p>partitions written</p><ul class="partitions">${parts(partitions.wrote)}</ul>` : "") +
    (partitions.read.length ? `<p>partitions read</p><ul class="partitions">${parts(partitions.read)}</ul>` : "") +
    (detail.parent ? html`<p>parent: ${detail.parent.job?.name ?? ""} ${detail.parent.runId}</p>` : "") +
    (detail.children.length ? html`<p>${detail.children.length} child runs</p>` : "") +
    Object.entries(run.facets ?? {}).map(([name, facet]) =>
      html`<details class="facet"><summary>facet ${name}</summary><pre>${JSON.stringify(facet, null, 2)}</pre></details>`).join("") +
    `<p><button type="button" id="run-events">The run's OpenLineage events</button></p><div id="run-events-list"></div>`;
  $("run-events").addEventListener("click", async () => {
    const found = await api(`/api/v2/runs/${seg(runId)}/events`).catch((error) => ({ events: [], error: String(error) }));
    $("run-events-list").innerHTML = (found.error ? html`<p class="state-FAILED">${found.error}</p>` : "") +
      `<ol class="raw-events">${found.events.map(rawEvent).join("")}</ol>` +
      (found.truncated ? `<p class="small">more events may exist (the read was bounded)</p>` : "") +
      (!found.error && !found.events.length ? `<p class="hint">none found in the raw topic around the run's times</p>` : "");
  });
}

// One raw OpenLineage event, folded: when, what, which job and run; its JSON inside.
function rawEvent(event: any): string {
  const job = event.job ?? {};
  return html`<li><details><summary><span class="state-${event.eventType}">${event.eventType ?? "event"}</span> ${event.eventTime} ` +
    html`${job.name ?? event.dataset?.name ?? ""} <span class="small">${job.namespace ?? ""}</span></summary>` +
    html`<pre>${JSON.stringify(event, null, 2)}</pre></details></li>`;
}

function fieldPage(panel: HTMLElement, id: string): void {
  const node = shown.get(id);
  if (!node) return;
  panel.insertAdjacentHTML("beforeend", html`<p>type: ${node.data.fieldType ?? "unknown"}</p><h3>Derived from</h3>` +
    `<ul>${node.data.inputFields.map((f: any) => html`<li>${f.dataset}.${f.field} <span class="small">${f.transformationDescription ?? ""}</span></li>`).join("") || "<li class=hint>a source column</li>"}</ul>`);
}

// --- controls -------------------------------------------------------------------------------------------------------
function syncControls(view: View): void {
  $<HTMLInputElement>("depth").value = String(view.depth);
  $<HTMLSelectElement>("direction").value = view.dir;
  $<HTMLInputElement>("columns").checked = view.columns;
  const asOf = $<HTMLInputElement>("as-of");
  asOf.value = view.asOf ? toLocalInput(new Date(view.asOf)) : "";
}

function toLocalInput(date: Date): string {
  const local = new Date(date.getTime() - date.getTimezoneOffset() * 60_000);
  return local.toISOString().slice(0, 16);
}

function download(name: string, blob: Blob): void {
  const link = Object.assign(document.createElement("a"), { href: URL.createObjectURL(blob), download: name });
  link.click();
  URL.revokeObjectURL(link.href);
}

function setupControls(): void {
  const update = (change: Partial<View>) => writeView({ ...readView().view, ...change });
  $<HTMLInputElement>("depth").addEventListener("change", (e) => update({ depth: Number((e.target as HTMLInputElement).value) }));
  $<HTMLSelectElement>("direction").addEventListener("change", (e) => update({ dir: (e.target as HTMLSelectElement).value as Direction }));
  $<HTMLInputElement>("columns").addEventListener("change", (e) => update({ columns: (e.target as HTMLInputElement).checked }));
  $<HTMLInputElement>("as-of").addEventListener("change", (e) => {
    const value = (e.target as HTMLInputElement).value;
    update({ asOf: value ? new Date(value).toISOString() : undefined });
  });
  $<HTMLInputElement>("as-of-days").addEventListener("change", (e) => {
    const days = Number((e.target as HTMLInputElement).value);
    update({ asOf: days ? new Date(Date.now() - days * 86_400_000).toISOString() : undefined });
  });
  $("now").addEventListener("click", () => { $<HTMLInputElement>("as-of-days").value = "0"; update({ asOf: undefined }); });
  $("zoom-in").addEventListener("click", async () => (await canvasModule()).zoomBy(1.25));
  $("zoom-out").addEventListener("click", async () => (await canvasModule()).zoomBy(0.8));
  $("fit").addEventListener("click", async () => (await canvasModule()).fit());
  const cy = () => loadedCanvas?.canvas();
  $("export-png").addEventListener("click", () => cy() && download("lineage.png", cy()!.png({ full: true, scale: 2, bg: "#ffffff", output: "blob" }) as any));
  $("export-svg").addEventListener("click", () => cy() && download("lineage.svg", new Blob([(cy() as any).svg({ full: true, bg: "#ffffff" })], { type: "image/svg+xml" })));
  $("share").addEventListener("click", async () => {
    try { await navigator.clipboard.writeText(location.href); notice("link copied"); } catch { window.prompt("Link to this view:", location.href); }
  });
}

// --- the operator view ----------------------------------------------------------------------------------------------
let streaming: AbortController | undefined;
let statusTimer: number | undefined;

function alertItem(alert: any): HTMLLIElement {
  const item = document.createElement("li");
  const exposure = alert.kind === "sensitiveExposure" && alert.exposure;
  item.className = exposure ? "exposure" : `change-${alert.severity}`;
  const link = lineageLink(datasetId(alert.dataset.namespace, alert.dataset.name), alert.dataset.name, exposure ? "up" : "down") + " ";
  item.innerHTML = exposure
    ? link + html`(${alert.dataset.namespace}) is not cleared for ${alert.exposure.tag} and now receives it in ${exposedFields(alert)} at ${alert.eventTime}`
    : link + html`(${alert.dataset.namespace}) changed by ${alert.job.name} at ${alert.eventTime}: ` +
      alert.changes.map((c: any) => html`${c.kind} ${c.path}`).join(", ") + html` — ${alert.impactedJobs.length} jobs downstream`;
  return item;
}

// A sensitive-exposure alert's columns, each with where its values come from (the tagged origin column)
function exposedFields(alert: any): string {
  const columns = alert.exposure.columns.map((c: any) => `${c.field} (from ${c.origin.name}.${c.origin.field})`);
  return columns.join(", ") + (alert.exposure.columnsTruncated ? ", …" : "");
}

async function showOperator(): Promise<void> {
  const list = $("alerts");
  const recent = await api("/api/v2/alerts", { limit: 50 }).catch(() => ({ alerts: [] }));
  list.replaceChildren(...recent.alerts.map(alertItem));
  streamAlerts(list);
  const letters = await api("/api/v2/dead-letters", { limit: 50 }).catch(() => ({ deadLetters: [] }));
  $("dead-letters").querySelector("tbody")!.innerHTML = letters.deadLetters.map((d: any) =>
    html`<tr><td>${d.failedAt}</td><td>${d.stage}</td><td>${d.errorClass}</td><td>${d.errorMessage}</td><td>${d.sourceTopic ?? d.origin ?? ""}</td></tr>`).join("");
  await refreshStatus();
  window.clearInterval(statusTimer);
  statusTimer = window.setInterval(refreshStatus, 10_000);
}

async function refreshStatus(): Promise<void> {
  const status = await api("/api/v2/status").catch((error) => ({ verdict: String(error), stages: [], reasons: [] }));
  $("verdict").textContent = `${status.verdict}${status.reasons?.length ? `: ${status.reasons.join("; ")}` : ""}`;
  $("stages").querySelector("tbody")!.innerHTML = status.stages.map((s: any) =>
    html`<tr><td>${s.stage}</td><td>${s.group}</td><td>${s.lag ?? s.lag_error ?? ""}</td><td>${s.last_event ?? ""}</td></tr>`).join("");
}

// Server-sent events read with fetch (EventSource cannot send the bearer token).
async function streamAlerts(list: HTMLElement): Promise<void> {
  streaming?.abort();
  streaming = new AbortController();
  const state = $("stream-state");
  try {
    const response = await fetch("/api/v2/alerts/stream", { headers: headers(), signal: streaming.signal });
    if (!response.ok || !response.body) { state.textContent = `live alerts unavailable (${response.status})`; return; }
    state.textContent = "live";
    document.body.dataset.alertStream = "live";
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const message = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = message.split("\n").find((line) => line.startsWith("data: "));
        if (data) list.prepend(alertItem(JSON.parse(data.slice(6))));
      }
    }
    state.textContent = "disconnected";
  } catch (error) {
    if ((error as Error).name !== "AbortError") state.textContent = `disconnected: ${error}`;
  }
}

// --- the events browser: the raw events as published, newest first -------------------------------------------------
const EVENTS_PAGE = 50;
const MAX_EVENTS_DEPTH = 10_000; // the server reads at most offset + limit records per partition

async function showEvents(params: URLSearchParams): Promise<void> {
  const view = $("events-view");
  const offset = Number(params.get("offset")) || 0, after = params.get("after") ?? "", before = params.get("before") ?? "";
  const found = await api("/api/v1/events/lineage", { limit: EVENTS_PAGE, offset, after: after || undefined, before: before || undefined })
    .catch((error) => ({ events: [], totalCount: 0, error: String(error) }));
  const link = (at: number, text: string) => `<a href="#/events?${new URLSearchParams({ after, before, offset: String(at) })}">${text}</a>`;
  const local = (iso: string) => (iso && !Number.isNaN(Date.parse(iso)) ? toLocalInput(new Date(iso)) : "");
  view.innerHTML = `<h1 class="attention">OpenLineage events</h1>` +
    `<form class="event-window"><label>published from <input type="datetime-local" name="after" value="${local(after)}"></label> ` +
    `<label>to <input type="datetime-local" name="before" value="${local(before)}"></label> <button type="submit">Show</button></form>` +
    (found.error ? html`<p class="state-FAILED">${found.error}</p>` : "") +
    html`<p class="small">${found.totalCount} events; ${found.totalCount ? offset + 1 : 0}–${offset + found.events.length}, newest first</p>` +
    `<ol class="raw-events" start="${offset + 1}">${found.events.map(rawEvent).join("")}</ol><p>` +
    (offset > 0 ? link(Math.max(0, offset - EVENTS_PAGE), "newer") + " " : "") +
    (offset + found.events.length >= found.totalCount ? ""
      : offset + 2 * EVENTS_PAGE <= MAX_EVENTS_DEPTH ? link(offset + EVENTS_PAGE, "older")
        : `<span class="hint">older: narrow the window</span>`) + "</p>";
  view.querySelector("form.event-window")!.addEventListener("submit", (event) => {
    event.preventDefault();
    const form = new FormData(event.target as HTMLFormElement);
    const iso = (name: string) => (form.get(name) ? new Date(String(form.get(name))).toISOString() : "");
    location.hash = `#/events?${new URLSearchParams({ after: iso("after"), before: iso("before") })}`;
  });
  document.body.dataset.events = "ready";
}

// --- routing --------------------------------------------------------------------------------------------------------
const HOME_REFRESH_MS = 30_000; // the home page follows what needs attention while it is open
let homeTimer: number | undefined;

const VIEWS: Record<string, string> = { home: "home-view", lineage: "lineage-view", jobs: "browse-view",
  datasets: "browse-view", events: "events-view", operator: "operator-view" };

async function route(): Promise<void> {
  const { route: asked, view } = readView();
  const route = asked in VIEWS ? asked : "home";
  for (const id of new Set(Object.values(VIEWS))) $(id).hidden = id !== VIEWS[route];
  for (const name of Object.keys(VIEWS)) $(`nav-${name}`).toggleAttribute("aria-current", name === route);
  if (route !== "operator") { streaming?.abort(); window.clearInterval(statusTimer); }
  window.clearInterval(homeTimer);
  if (route === "home") homeTimer = window.setInterval(() => !document.hidden && showHome(), HOME_REFRESH_MS);
  const params = new URLSearchParams(location.hash.split("?")[1] ?? "");
  try {
    if (route === "operator") return await showOperator();
    if (route === "home") return await showHome();
    if (route === "events") return await showEvents(params);
    if (route === "jobs") return await showJobs($("browse-view"), params);
    if (route === "datasets") return await showDatasets($("browse-view"), params);
    await showLineage(view);
  } catch (error) {
    notice(String(error));
    $(VIEWS[route]).insertAdjacentHTML("afterbegin", html`<p class="state-FAILED">${String(error)}</p>`);
  }
}

setupSearch();
setupControls();
if (window.innerWidth < 1200) $("graph").parentElement!.querySelector("details.legend")?.removeAttribute("open"); // room
window.addEventListener("hashchange", route);
route();
