// Short names for graph cards: the part of a name that tells nodes apart, by how integrations name things. The full
// namespace and name stay in the tooltip and the side panel.

export const SHORT = 30;

// A path (s3://bucket/a/b/table, /warehouse/x/dt=2024-01-01): its last segment that is not a partition (key=value);
// a dotted table name (db.schema.table): schema.table; a job (dag.task, spark_app.plan_node.output_table): its first
// and last parts. Whatever is still too long loses its middle, never its end (the end tells tables apart).
export function shortName(kind: string, name: string, max = SHORT): string {
  const trimmed = name.replace(/\/+$/, "");
  let short = trimmed;
  if (trimmed.includes("/")) {
    const segments = trimmed.split("/").filter(Boolean);
    const named = segments.filter((segment) => !/^[^=]+=/.test(segment));
    const last = named[named.length - 1] ?? segments[segments.length - 1] ?? trimmed;
    short = last === trimmed ? last : `…/${last}`;
  } else if (kind !== "job" && trimmed.split(".").length > 2) {
    short = trimmed.split(".").slice(-2).join(".");
  } else if (kind === "job" && trimmed.length > max && trimmed.includes(".")) {
    const parts = trimmed.split(".");
    const last = parts[parts.length - 1];
    short = parts[0].length + last.length < max ? `${parts[0]}…${last}` : `…${last}`;
  }
  return middle(short, max);
}

export function middle(text: string, max = SHORT): string {
  if (text.length <= max) return text;
  const tail = Math.ceil((max - 1) * 0.6);
  return `${text.slice(0, max - 1 - tail)}…${text.slice(text.length - tail)}`;
}

// A namespace without its scheme's noise, for a card's second line: postgres://db.prod:5432 → db.prod:5432.
export function shortNamespace(namespace: string, max = SHORT): string {
  return middle(namespace.replace(/^[a-z0-9+.-]+:\/\//i, ""), max);
}
