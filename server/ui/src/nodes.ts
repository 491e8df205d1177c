// Lineage nodes as the API answers them (Marquez's LineageGraph), and what every view shows of one: its latest run's
// state, its short label, the colours of states and edges. No canvas here: the graph view loads that on demand.
import { parseNodeId } from "./api";
import { shortName } from "./names";

export type Edge = { origin: string; destination: string };
export type GraphNode = { id: string; type: "DATASET" | "JOB" | "DATASET_FIELD"; data: any; inEdges: Edge[]; outEdges: Edge[] };

export const COLOURS = { COMPLETED: "#15803d", FAILED: "#c2410c", RUNNING: "#b45309", read: "#94a3b8", write: "#475569" };
// OpenLineage run states (as the graph stores them) in charts and timelines
export const RUN_STATE_COLOURS: Record<string, string> = { COMPLETE: COLOURS.COMPLETED, FAIL: COLOURS.FAILED,
  ABORT: "#7c2d12", START: COLOURS.RUNNING, RUNNING: COLOURS.RUNNING };
// OpenLineage run states as Marquez names them (and the job pages show them)
export const RUN_STATE_NAMES: Record<string, string> = { COMPLETE: "COMPLETED", FAIL: "FAILED", ABORT: "ABORTED",
  START: "RUNNING", RUNNING: "RUNNING" };

export function runState(node: GraphNode): string | undefined {
  return node.type === "JOB" ? node.data.latestRun?.state : undefined;
}

export function label(node: GraphNode): string {
  if (node.type === "DATASET_FIELD") return node.data.field;
  const name: string = node.data.name ?? parseNodeId(node.id).name;
  return shortName(node.type.toLowerCase(), name);
}
