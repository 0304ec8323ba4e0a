"""A batch's life on a synthesis worker: claimed (`claim`), spoken alone (`speak`) or in a stream
through the decode slots (`stream`), recorded (`record`); `work` holds what crosses between them,
`cleanup` the files a dead writer left."""
