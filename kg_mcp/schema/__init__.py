"""The KG summary a client gets with the server instructions: what the KG holds, counted
(`census`), read as an ontology or as entity-relation data (`shape`), and written within a token
budget (`summary`)."""
