// Modules without type declarations of their own: a Cytoscape extension, the style sheet Vite bundles.
declare module "cytoscape-svg";
declare module "*.css";
