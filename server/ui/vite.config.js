// The UI's build: one bundle into ../ui-dist/, served by `lineage serve` at / (assets under /assets/).
import { defineConfig } from "vite";

export default defineConfig({
  base: "/",
  build: { outDir: "../ui-dist", emptyOutDir: true, chunkSizeWarningLimit: 2000 },
});
