"""What a tool call carries while it runs: who is calling (`caller`), until when (`deadline`), and
where its progress and cancellation go (`progress`). Each is a context variable set by the server
around a call and read by the loops and bounds below it."""
