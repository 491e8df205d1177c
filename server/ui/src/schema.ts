// Two schema versions side by side: every field of either, what happened to it (added, removed, type changed), and
// the drift alert that reported the change with what it reaches downstream (jobs, datasets, derived columns).
import { escape } from "./api";

export type Field = { name: string; type?: string | null; fields?: Field[] | null };
export type DiffRow = { path: string; before: string | null; after: string | null; change: "added" | "removed" | "changed" | "same" };

// Nested fields (structs) flattened to dotted paths, as the drift alerts name them.
export function flatten(fields: Field[] | null | undefined, prefix = ""): Map<string, string> {
  const out = new Map<string, string>();
  for (const field of fields ?? []) {
    const path = prefix ? `${prefix}.${field.name}` : field.name;
    out.set(path, field.type ?? "");
    for (const [inner, type] of flatten(field.fields, path)) out.set(inner, type);
  }
  return out;
}

export function diffRows(before: Field[], after: Field[]): DiffRow[] {
  const old = flatten(before), now = flatten(after);
  const paths = [...new Set([...old.keys(), ...now.keys()])];
  const order = (path: string) => (now.has(path) ? [...now.keys()].indexOf(path) : old.size + [...old.keys()].indexOf(path));
  return paths.sort((a, b) => order(a) - order(b)).map((path) => {
    const was = old.has(path) ? old.get(path)! : null, is = now.has(path) ? now.get(path)! : null;
    const change = was === null ? "added" : is === null ? "removed" : was !== is ? "changed" : "same";
    return { path, before: was, after: is, change };
  });
}


export function diffTable(before: { version: string; fields: Field[] }, after: { version: string; fields: Field[] },
                          alert?: any): string {
  const rows = diffRows(before.fields, after.fields);
  const changed = rows.filter((r) => r.change !== "same").length;
  return `<table class="schema-diff"><caption>${escape(before.version.slice(0, 10))} → ${escape(after.version.slice(0, 10))}: ` +
    `${changed} changed fields</caption><tr><th>field</th><th>before</th><th>after</th></tr>` +
    rows.map((r) => `<tr class="diff-${r.change}"><td>${escape(r.path)}</td><td>${escape(r.before ?? "—")}</td>` +
      `<td>${escape(r.after ?? "—")}</td></tr>`).join("") +
    `</table>` + (alert ? `<p class="change-${escape(alert.severity)}">alerted ${escape(alert.eventTime)}: ${escape(alert.severity)}, ` +
      `${alert.impactedJobs.length} jobs, ${alert.impactedDatasets.length} datasets and ${(alert.impactedColumns ?? []).length} columns ` +
      `downstream${alert.impactTruncated ? " (at least)" : ""}</p>` + ((alert.impactedColumns ?? []).length ? `<ul class="small">` +
      alert.impactedColumns.slice(0, 10).map((c: any) => `<li>${escape(c.name)}.${escape(c.field)}</li>`).join("") + `</ul>` : "") : "");
}
