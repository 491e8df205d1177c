// Browsing without a name in mind: every job (latest activity first, by its latest run's state) and a namespace's
// datasets, a page at a time, each a link into the graph.
import { api, html, lineageLink } from "./api";
import { seconds } from "./runs";

const PAGE = 50;
const STATES = ["RUNNING", "COMPLETED", "FAILED", "ABORTED"];

function pager(route: string, params: Record<string, string>, offset: number, shown: number, total: number): string {
  const at = (to: number) => `#/${route}?${new URLSearchParams({ ...params, offset: String(to) })}`;
  return `<p class="pager">` + (offset > 0 ? `<a href="${at(Math.max(0, offset - PAGE))}">previous</a> ` : "") +
    html`<span class="small">${total ? offset + 1 : 0}–${offset + shown} of ${total}</span>` +
    (offset + shown < total ? ` <a href="${at(offset + PAGE)}">next</a>` : "") + `</p>`;
}

export async function showJobs(view: HTMLElement, params: URLSearchParams): Promise<void> {
  const offset = Number(params.get("offset")) || 0, state = params.get("state") ?? "";
  const found = await api("/api/v1/jobs", { limit: PAGE, offset, lastRunStates: state || undefined });
  const filters = ["", ...STATES].map((s) => `<a class="filter${s === state ? " chosen" : ""}" href="#/jobs?${new URLSearchParams(s ? { state: s } : {})}"` +
    `${s === state ? ' aria-current="true"' : ""}>${s ? s.toLowerCase() : "all"}</a>`).join(" ");
  view.innerHTML = `<h1 class="attention">Jobs</h1><p class="filters">latest run: ${filters}</p>` +
    `<table class="browse"><tr><th>job</th><th>namespace</th><th>latest run</th><th>duration</th><th>updated</th></tr>` +
    found.jobs.map((j: any) => `<tr><td>${lineageLink(`job:${j.namespace}:${j.name}`, j.name, "both", 2)}</td>` +
      html`<td class="small">${j.namespace}</td><td class="state-${j.latestRun?.state ?? ""}">${j.latestRun?.state ?? "no run"}</td>` +
      html`<td>${seconds(j.latestRun?.durationMs)}</td><td class="small">${j.updatedAt ?? ""}</td></tr>`).join("") + `</table>` +
    pager("jobs", state ? { state } : {}, offset, found.jobs.length, found.totalCount);
  document.body.dataset.browse = "jobs";
}

export async function showDatasets(view: HTMLElement, params: URLSearchParams): Promise<void> {
  const offset = Number(params.get("offset")) || 0;
  const namespaces = (await api("/api/v1/namespaces", { limit: 1000 })).namespaces.map((n: any) => n.name);
  const namespace = params.get("namespace") || namespaces[0] || "";
  const found = namespace ? await api(`/api/v1/namespaces/${encodeURIComponent(namespace)}/datasets`, { limit: PAGE, offset })
    : { datasets: [], totalCount: 0 };
  view.innerHTML = `<h1 class="attention">Datasets</h1><p><label>namespace <select id="browse-namespace">` +
    namespaces.map((n: string) => html`<option${n === namespace ? " selected" : ""}>${n}</option>`).join("") + `</select></label></p>` +
    `<table class="browse"><tr><th>dataset</th><th>fields</th><th>tags</th><th>last written</th></tr>` +
    found.datasets.map((d: any) => `<tr><td>${lineageLink(`dataset:${d.namespace}:${d.name}`, d.name, "both", 2)}</td>` +
      html`<td>${d.fields.length}</td><td>${d.tags.join(", ")}</td><td class="small">${d.lastModifiedAt ?? "never"}</td></tr>`).join("") +
    `</table>` + pager("datasets", { namespace }, offset, found.datasets.length, found.totalCount);
  view.querySelector<HTMLSelectElement>("#browse-namespace")!.addEventListener("change", (event) => {
    location.hash = `#/datasets?${new URLSearchParams({ namespace: (event.target as HTMLSelectElement).value })}`;
  });
  document.body.dataset.browse = "datasets";
}
