"""MirrorMaker 2 concepts: replication policies, filters, internal topic names, record formats."""
