"""How a batch's rows reach the output table: the choice of write (driver MERGE, Spark
MERGE, split write, replace) and its counts. Layer 3: it reads through `delta`, and knows no
view kind."""
