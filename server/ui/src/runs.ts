// A job's runs over time: one bar per run from start to end (still-running runs reach now), coloured by state, in
// as many lanes as runs overlap; under it the duration of each finished run, oldest first.
import { escape } from "./api";
import { RUN_STATE_COLOURS } from "./nodes";

export type TimedRun = { runId: string; state: string; startTime?: string | null; endTime?: string | null;
  lastEventTime?: string | null; durationMs?: number | null; errorMessage?: string | null;
  inputRowCount?: number | null; outputRowCount?: number | null };

const MAX_LANES = 4;

export type Bar = { run: TimedRun; from: number; to: number; lane: number };

// Bars in start order, each in the first lane free at its start (the last lane takes the rest).
export function lanes(runs: TimedRun[], now: number): Bar[] {
  const ends: number[] = [];
  const bars: Bar[] = [];
  const timed = runs.map((run) => {
    const from = Date.parse(run.startTime ?? run.endTime ?? run.lastEventTime ?? "");
    const end = Date.parse(run.endTime ?? "");
    const running = run.state === "START" || run.state === "RUNNING";
    return { run, from, to: Number.isNaN(end) ? (running ? now : from) : end };
  }).filter((bar) => !Number.isNaN(bar.from)).sort((a, b) => a.from - b.from);
  for (const bar of timed) {
    let lane = ends.findIndex((end) => end <= bar.from);
    if (lane < 0) lane = ends.length < MAX_LANES ? ends.length : MAX_LANES - 1;
    ends[lane] = Math.max(ends[lane] ?? 0, bar.to);
    bars.push({ ...bar, lane });
  }
  return bars;
}


export function seconds(ms: number | null | undefined): string {
  if (ms == null) return "";
  return ms < 120_000 ? `${(ms / 1000).toFixed(1)} s` : ms < 7_200_000 ? `${(ms / 60_000).toFixed(1)} min` : `${(ms / 3_600_000).toFixed(1)} h`;
}

export function timeline(runs: TimedRun[], now = Date.now(), width = 360): string {
  const bars = lanes(runs, now);
  if (!bars.length) return `<p class="hint">no runs</p>`;
  const first = bars[0].from, last = Math.max(...bars.map((b) => b.to), first + 1);
  const laneCount = Math.max(...bars.map((b) => b.lane)) + 1;
  const laneHeight = 14, height = laneCount * (laneHeight + 4);
  const x = (t: number) => ((t - first) / (last - first)) * (width - 4) + 2;
  const rects = bars.map((b) => {
    const rows = [b.run.inputRowCount != null ? `read ${b.run.inputRowCount} rows` : "",
      b.run.outputRowCount != null ? `wrote ${b.run.outputRowCount} rows` : ""].filter(Boolean).join(", ");
    const title = `${b.run.state} ${b.run.startTime ?? ""} ${seconds(b.run.durationMs)} ${rows} ${b.run.errorMessage ?? ""}`.trim();
    return `<rect class="run-bar" data-run="${escape(b.run.runId)}" x="${x(b.from).toFixed(1)}" y="${b.lane * (laneHeight + 4)}" ` +
      `width="${Math.max(x(b.to) - x(b.from), 3).toFixed(1)}" height="${laneHeight}" rx="2" ` +
      `fill="${RUN_STATE_COLOURS[b.run.state] ?? "#94a3b8"}"><title>${escape(title)}</title></rect>`;
  }).join("");
  const finished = bars.filter((b) => b.run.durationMs != null);
  const durations = finished.map((b) => b.run.durationMs!);
  const top = Math.max(...durations, 1);
  const trend = finished.length > 1 ? `<svg class="chart" width="${width}" height="40" role="img" ` +
    `aria-label="durations, oldest first: ${durations.map(seconds).join(", ")}"><polyline fill="none" stroke="#2563eb" stroke-width="2" points="` +
    finished.map((b) => `${x(b.from).toFixed(1)},${(38 - (b.run.durationMs! / top) * 34).toFixed(1)}`).join(" ") + `"/></svg>` +
    `<p class="small">duration: last ${seconds(durations[durations.length - 1])}, longest ${seconds(top)}</p>` : "";
  const failed = bars.filter((b) => b.run.state === "FAIL" || b.run.state === "ABORT").length;
  return `<svg class="timeline" width="${width}" height="${height}" role="img" aria-label="${bars.length} runs from ` +
    `${escape(new Date(first).toISOString())}: ${failed} failed">${rects}</svg>` +
    `<p class="small">${escape(new Date(first).toISOString().slice(0, 16))} → ${escape(new Date(last).toISOString().slice(0, 16))}` +
    ` · ${bars.length} runs, ${failed} failed</p>` + trend;
}
