// The home page: what needs attention now (breaking drift first, failed and long-running runs, dead letters, pipeline
// lag), each a link into the graph, and the platform's size and runs per day.
import { api, datasetId, escape, html, lineageLink } from "./api";
import { shortName } from "./names";
import { RUN_STATE_COLOURS } from "./nodes";

const SHOWN = 8; // items per card
const SEVERITY_ORDER: Record<string, number> = { BREAKING: 0, UNKNOWN: 1, COMPATIBLE: 2 };


export function age(from: string | null | undefined, now = Date.now()): string {
  if (!from) return "";
  const seconds = Math.max(0, (now - new Date(from).getTime()) / 1000);
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172_800) return `${(seconds / 3600).toFixed(1)} h`;
  return `${Math.round(seconds / 86_400)} days`;
}

function card(id: string, title: string, count: number | string, body: string): string {
  return `<section class="card" id="${id}" aria-labelledby="${id}-title"><h2 id="${id}-title">${title} ` +
    html`<span class="count">${count}</span></h2>` + body + "</section>";
}

// One line per dataset and alert kind (its newest alert, how many there were), breaking first, then newest.
function alertsCard(alerts: any[]): string {
  const latest = new Map<string, { alert: any; count: number }>();
  for (const a of alerts) {
    const key = `${a.kind}|${a.dataset.namespace}|${a.dataset.name}`;
    const seen = latest.get(key);
    if (!seen) latest.set(key, { alert: a, count: 1 });
    else {
      seen.count++;
      if (String(a.eventTime) > String(seen.alert.eventTime)) seen.alert = a;
    }
  }
  const ranked = [...latest.values()].sort((x, y) =>
    (SEVERITY_ORDER[x.alert.severity] ?? 2) - (SEVERITY_ORDER[y.alert.severity] ?? 2) ||
    String(y.alert.eventTime).localeCompare(String(x.alert.eventTime)));
  const items = ranked.slice(0, SHOWN).map(({ alert: a, count }) => {
    const dataset = datasetId(a.dataset.namespace, a.dataset.name);
    const what = a.kind === "sensitiveExposure" && a.exposure
      ? html`${a.exposure.tag} newly reaches ${a.exposure.columns.length} columns`
      : html`${a.changes.map((c: any) => `${c.kind} ${c.path}`).join(", ")}; ${a.impactedJobs.length} jobs downstream`;
    const kind = a.kind === "sensitiveExposure" ? "exposure" : `change-${a.severity}`;
    return `<li class="${kind}" title="${escape(`${a.dataset.namespace} ${a.dataset.name}`)}">` +
      lineageLink(dataset, shortName("dataset", a.dataset.name), a.kind === "sensitiveExposure" ? "up" : "down") +
      html` <span class="small">${a.severity} · ${age(a.eventTime)} ago${count > 1 ? ` · ${count} alerts` : ""}</span><br>` +
      what + "</li>";
  });
  const breaking = alerts.filter((a) => a.severity === "BREAKING").length;
  return card("home-alerts", "Schema drift", breaking ? `${breaking} breaking of ${alerts.length}` : alerts.length,
    items.length ? `<ul>${items.join("")}</ul>` : `<p class="hint">no drift alerts</p>`);
}

function runItem(run: any, when: string): string {
  const job = run.job ?? { namespace: "?", name: "?" };
  return `<li>` + lineageLink(`job:${job.namespace}:${job.name}`, job.name, "both") +
    html` <span class="state-${run.state}">${run.state}</span> <span class="small">${when}</span>` +
    (run.errorMessage ? html`<br><span class="error">${String(run.errorMessage).slice(0, 200)}</span>` : "") + "</li>";
}

function runsCards(overview: any): string {
  const failed = overview.failedRuns.map((r: any) => runItem(r, `${age(r.endTime ?? r.startTime)} ago`));
  const running = overview.runningRuns.map((r: any) => runItem(r, `running for ${age(r.startTime)}`));
  return card("home-failed", "Failed runs", failed.length, failed.length ? `<ul>${failed.slice(0, SHOWN).join("")}</ul>`
      : `<p class="hint">none in the last 14 days</p>`) +
    card("home-running", "Running longest", running.length, running.length ? `<ul>${running.slice(0, SHOWN).join("")}</ul>`
      : `<p class="hint">nothing running</p>`);
}

function partitionsCard(partitions: any[]): string {
  const items = partitions.slice(0, SHOWN).map((p) => `<li title="${escape(`${p.namespace} ${p.name}`)}">` +
    lineageLink(datasetId(p.namespace, p.name), shortName("dataset", p.name), "down") +
    html` <span class="small">${p.key}</span><br><span class="error">${p.reason ?? "failed"}</span></li>`);
  return card("home-partitions", "Failed partitions", partitions.length,
    items.length ? `<ul>${items.join("")}</ul>` : `<p class="hint">none written by the failed runs</p>`);
}

function deadLettersCard(letters: any[]): string {
  const items = letters.slice(0, SHOWN).map((d) =>
    html`<li><span class="small">${d.stage} · ${age(d.failedAt)} ago</span><br>${d.errorClass}: ${String(d.errorMessage ?? "").slice(0, 160)}</li>`);
  return card("home-dead-letters", "Dead letters", letters.length, items.length
    ? `<ul>${items.join("")}</ul><p><a href="#/operator">all dead letters</a></p>` : `<p class="hint">none</p>`);
}

function pipelineCard(status: any): string {
  const rows = (status.stages ?? []).map((s: any) =>
    html`<tr class="${s.lag > 0 ? "lagging" : ""}"><td>${s.stage}</td><td>${s.lag ?? s.lag_error ?? ""}</td><td>${age(s.last_event)}</td></tr>`);
  return card("home-pipeline", "Pipeline", status.verdict ?? "?",
    (status.reasons?.length ? html`<p class="state-FAILED">${status.reasons.join("; ")}</p>` : "") +
    `<table><tr><th>stage</th><th>lag</th><th>last event</th></tr>${rows.join("")}</table>`);
}

// Runs per day as stacked bars (completed, failed, running, other), one bar per day of the window.
export function runsChart(counted: { day: string; states: Record<string, number> }[], days = 14, today = new Date(),
                          width = 360, height = 90): string {
  if (!counted.length) return `<p class="hint">no runs in the window</p>`;
  const byDay = new Map(counted.map((d) => [d.day, d.states]));
  const perDay = Array.from({ length: days }, (_, i) => {
    const day = new Date(today.getTime() - (days - 1 - i) * 86_400_000).toISOString().slice(0, 10);
    return { day, states: byDay.get(day) ?? {} }; // every day of the window, those without runs too
  });
  const totals = perDay.map((d) => Object.values(d.states).reduce((a, b) => a + b, 0));
  const max = Math.max(...totals, 1);
  const bar = width / perDay.length;
  const bars = perDay.map((d, i) => {
    let top = height;
    return Object.entries(d.states).sort(([a], [b]) => a.localeCompare(b)).map(([state, count]) => {
      const h = (count / max) * (height - 4);
      top -= h;
      return `<rect x="${(i * bar + 1).toFixed(1)}" y="${top.toFixed(1)}" width="${Math.max(bar - 2, 1).toFixed(1)}" ` +
        `height="${h.toFixed(1)}" fill="${RUN_STATE_COLOURS[state] ?? "#94a3b8"}"><title>${escape(d.day)} ${escape(state)}: ${count}</title></rect>`;
    }).join("");
  }).join("");
  const label = perDay.map((d, i) => `${d.day}: ${totals[i]}`).join(", ");
  return `<svg class="chart" width="${width}" height="${height}" role="img" aria-label="runs per day: ${escape(label)}">${bars}</svg>` +
    html`<p class="small">${perDay[0].day} to ${perDay[perDay.length - 1].day}; most ${max} runs a day</p>`;
}

export async function showHome(): Promise<void> {
  const view = document.getElementById("home-view")!;
  const [overview, alerts, letters, status] = await Promise.all([
    api("/api/v2/overview", { days: 14, limit: 20 }).catch((error) => ({ error: String(error) })),
    api("/api/v2/alerts", { limit: 100 }).catch(() => ({ alerts: [] })),
    api("/api/v2/dead-letters", { limit: 50 }).catch(() => ({ deadLetters: [] })),
    api("/api/v2/status").catch((error) => ({ verdict: String(error), stages: [], reasons: [] })),
  ]);
  if (overview.error) { view.innerHTML = html`<p class="state-FAILED">${overview.error}</p>`; return; }
  const counts = overview.counts;
  view.innerHTML = `<section class="summary" aria-label="platform">` +
    html`<div class="figure"><b>${counts.jobs}</b> jobs</div><div class="figure"><b>${counts.datasets}</b> datasets</div>` +
    html`<div class="figure"><b>${counts.runs}</b> runs</div>` +
    `<div class="runs-chart"><h2 class="small">Runs per day (14 days)</h2>${runsChart(overview.runsPerDay)}</div></section>` +
    `<h1 class="attention">Needs attention</h1><div class="cards">` +
    alertsCard(alerts.alerts) + runsCards(overview) + partitionsCard(overview.failedPartitions ?? []) +
    deadLettersCard(letters.deadLetters) + pipelineCard(status) + "</div>";
  document.body.dataset.home = "ready";
}
