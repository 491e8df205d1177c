"""Stream processor: reorder by run, dedupe, normalize namespaces, detect schema drift."""
