// The server's API as the UI calls it: a bearer token asked for once (kept in localStorage), JSON answers, and the
// helpers every view shares (node ids, escaped HTML).

export type NodeRef = { kind: string; namespace: string; name: string; field?: string };

const TOKEN_KEY = "kafka-lineage-token";
// --- the API --------------------------------------------------------------------------------------------------------
export function headers(): HeadersInit {
  const token = localStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: `Bearer ${token}` } : {};
}

export async function call(path: string, params: Record<string, string | number | boolean | undefined> = {}): Promise<Response> {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== undefined && value !== "") query.set(key, String(value));
  const url = query.toString() ? `${path}?${query}` : path;
  let response = await fetch(url, { headers: headers() });
  if (response.status === 401) {
    const token = window.prompt("This lineage server asks for a bearer token:");
    if (token) {
      localStorage.setItem(TOKEN_KEY, token);
      response = await fetch(url, { headers: headers() });
    }
  }
  return response;
}

export async function api(path: string, params: Record<string, string | number | boolean | undefined> = {}): Promise<any> {
  const response = await call(path, params);
  const body = await response.json();
  if (!response.ok) throw new Error(body.message || `${response.status}`);
  return body;
}

export const seg = (value: string) => encodeURIComponent(value);

// Marquez node ids: a ":" followed by "//" or a digit belongs to the namespace (a URI), the last part takes the rest.
export function parseNodeId(id: string): NodeRef {
  const kind = id.split(":", 1)[0];
  const parts: string[] = [];
  const rest = id.slice(kind.length + 1);
  const wanted = kind === "datasetField" ? 3 : 2;
  let start = 0;
  const delimiter = /:(?!\/\/|\d)/g;
  let match: RegExpExecArray | null;
  while (parts.length < wanted - 1 && (match = delimiter.exec(rest)) !== null) {
    parts.push(rest.slice(start, match.index));
    start = match.index + 1;
  }
  parts.push(rest.slice(start));
  return { kind, namespace: parts[0], name: parts[1], field: parts[2] };
}

export const datasetId = (ns: string, name: string) => `dataset:${ns}:${name}`;

// A value as HTML text (attribute-safe).
export const escape = (value: unknown) => String(value ?? "").replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

// HTML from a template with every value escaped.
export function html(strings: TemplateStringsArray, ...values: unknown[]): string {
  return strings.reduce((out, text, i) => out + text + (i < values.length ? escape(values[i]) : ""), "");
}

// A link into the lineage graph around a node.
export function lineageLink(id: string, text: string, dir = "both", depth = 3): string {
  return html`<a href="#/lineage?node=${encodeURIComponent(id)}&depth=${depth}&dir=${dir}">${text}</a>`;
}
