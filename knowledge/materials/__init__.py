"""Materials: external sources an agent is asked to learn (uploaded files, pasted text and web
content, connector mirrors), their retained originals, learning jobs, and external signals."""
