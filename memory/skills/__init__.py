"""Skills and skill experience: base skills written by people, which skills an agent has
enabled, task outcomes, and each agent's overlay of lessons per skill (the Knowledge page's
Skill experience tab, the agent library's skill pages, the skills API)."""
