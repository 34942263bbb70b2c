"""The pipeline spec: its model, the YAML with line numbers, parsing and dependency order, the
schema checks of each view against its inputs. No Spark, no Delta: layer 1, above `errors`."""
