// A dataset's partitions by state: a calendar (a column per week, a row per weekday) when the keys hold a date, one
// cell per day coloured by its worst partition; otherwise a grid in key order.
import { escape } from "./api";

export type Partition = { key: string; state: string | null; reason?: string | null; stale?: boolean };

export const PARTITION_COLOURS: Record<string, string> = { SUCCESS: "#15803d", FAILED: "#c2410c", STALE: "#ca8a04",
  RUNNING: "#b45309", NONE: "#cbd5e1" };
const WORST = ["FAILED", "STALE", "RUNNING", "SUCCESS", "NONE"];
const CELL = 12;

export type Cell = { label: string; state: string; keys: string[]; column: number; row: number };

const DATE = /(\d{4})-(\d{2})-(\d{2})/;

export function worst(states: string[]): string {
  return WORST.find((state) => states.includes(state)) ?? "NONE";
}

export function cells(partitions: Partition[], perRow = 28): Cell[] {
  const dated = partitions.every((p) => DATE.test(p.key));
  if (!dated || !partitions.length) {
    return [...partitions].sort((a, b) => a.key.localeCompare(b.key)).map((p, i) => ({
      label: p.key, state: p.state ?? "NONE", keys: [p.key], column: i % perRow, row: Math.floor(i / perRow) }));
  }
  const days = new Map<string, Partition[]>();
  for (const p of partitions) {
    const day = DATE.exec(p.key)![0];
    days.set(day, [...(days.get(day) ?? []), p]);
  }
  const sorted = [...days.keys()].sort();
  const first = Date.parse(`${sorted[0]}T00:00:00Z`);
  const firstWeekday = (new Date(first).getUTCDay() + 6) % 7; // Monday first
  return sorted.map((day) => {
    const offset = Math.round((Date.parse(`${day}T00:00:00Z`) - first) / 86_400_000) + firstWeekday;
    const list = days.get(day)!;
    return { label: day, state: worst(list.map((p) => p.state ?? "NONE")), keys: list.map((p) => p.key),
      column: Math.floor(offset / 7), row: offset % 7 };
  });
}


export function partitionGrid(partitions: Partition[]): string {
  const grid = cells(partitions);
  if (!grid.length) return `<p class="hint">no partitions</p>`;
  const width = (Math.max(...grid.map((c) => c.column)) + 1) * (CELL + 2);
  const height = (Math.max(...grid.map((c) => c.row)) + 1) * (CELL + 2);
  const counts = new Map<string, number>();
  for (const p of partitions) counts.set(p.state ?? "NONE", (counts.get(p.state ?? "NONE") ?? 0) + 1);
  const rects = grid.map((c) => `<rect class="partition-cell" data-keys="${escape(c.keys.join("\n"))}" ` +
    `x="${c.column * (CELL + 2)}" y="${c.row * (CELL + 2)}" width="${CELL}" height="${CELL}" rx="2" ` +
    `fill="${PARTITION_COLOURS[c.state] ?? PARTITION_COLOURS.NONE}"><title>${escape(c.label)}: ${escape(c.state)}` +
    `${c.keys.length > 1 ? ` (${c.keys.length} partitions)` : ""}</title></rect>`).join("");
  const summary = [...counts].sort(([a], [b]) => WORST.indexOf(a) - WORST.indexOf(b))
    .map(([state, count]) => `<span class="swatch" style="background:${PARTITION_COLOURS[state] ?? PARTITION_COLOURS.NONE}"></span>${count} ${escape(state.toLowerCase())}`).join(" ");
  return `<svg class="partition-grid" width="${Math.max(width, CELL)}" height="${height}" role="img" ` +
    `aria-label="${partitions.length} partitions: ${escape(summary.replace(/<[^>]+>/g, ""))}">${rects}</svg><p class="small">${summary}</p>`;
}
