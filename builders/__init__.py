"""One folder per source: reader, builder, upstream pin, citation and a self-written dummy sample."""
