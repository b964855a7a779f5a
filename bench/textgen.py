"""Realistic, varied workplace text for the recall benchmarks: chat messages, memories and
entries about IT support, engineering, sales, projects, office life and HR — the same topics as
the labelled evaluation set, so keyword and vector routes face real competition. Deterministic
for a given seed."""

import random

FIRST = (
    "alice bob carol dave erin frank grace heidi ivan judy karl laura mallory nina oscar peggy quentin "
    "rupert sybil trent ursula victor wendy xavier yara zoe amir bea chen dmitri elena farah goran hana "
    "ines jamal kenji lucia mateo noor olu priya rafael sofia tomas uma wei yusuf"
).split()
SYSTEMS = (
    "VPN|Okta|Jira|Confluence|GitLab|Salesforce|Zendesk|the build server|the staging cluster|the payroll "
    "system|Slack|the wiki|the CRM|the data warehouse|Grafana|the billing service|the mobile app|the web "
    "shop|the search index|the mail gateway|the print server|Kubernetes|the API gateway|Snowflake|"
    "the HR portal|SAP|the ticket queue|the customer portal|the analytics dashboard|Outlook"
).split("|")
DEVICES = (
    "laptop|docking station|monitor|headset|badge reader|printer on floor two|printer on floor three|"
    "conference room screen|phone|keyboard|webcam|wifi access point|label printer|projector"
).split("|")
PROBLEMS = (
    "keeps crashing|is really slow today|won't start|shows a blank screen|logs me out every hour|"
    "rejects my password|times out|is stuck on updating|lost all my settings|throws a certificate warning|"
    "drops the connection|won't sync|freezes when I share my screen|prints garbage characters|"
    "says my license expired|cannot find the network drive"
).split("|")
FIXES = (
    "clearing the cache fixed it|a restart did the trick|I reinstalled the client and it works now|"
    "IT pushed a new certificate|the vendor released a patch|we rolled back yesterday's change|"
    "resetting the token solved it|it was a full disk|DNS was pointing at the old host|"
    "the firewall rule was missing|someone unplugged the switch|the license was renewed"
).split("|")
PROJECTS = (
    "Atlas|Borealis|Cobalt|Delta migration|Evergreen|Falcon|Gemini rollout|Harbor|Ion|Juniper|"
    "Keystone|Lighthouse|Meridian|Nimbus|Orion|Pioneer|Quartz|Redwood|Sapphire|Tundra"
).split("|")
CUSTOMERS = (
    "Northwind|Contoso|Globex|Initech|Umbrella Health|Stark Logistics|Wayne Foods|Acme Retail|Hooli|"
    "Vandelay Imports|Soylent Labs|Tyrell Energy|Cyberdyne Freight|Gringotts Bank|Oceanic Air|"
    "Pied Piper|Massive Dynamic|Wonka Sweets|Duff Brewing|Monarch Paper"
).split("|")
PLACES = (
    "the big meeting room|the kitchen|reception|the third floor|the parking garage|the rooftop|"
    "the Berlin office|the Lisbon office|the warehouse|the lab|the quiet room|the lobby"
).split("|")
DAYS = "Monday Tuesday Wednesday Thursday Friday".split()
FOODS = "pizza|tacos|sushi|curry|salad bowls|bagels|pastries|barbecue|dumplings|soup".split("|")
TOPICS = (
    "onboarding|the quarterly review|the offsite|expense policy|the security training|the hiring plan|"
    "the roadmap|the budget|the release notes|the incident review|the customer survey|the pricing change"
).split("|")

MESSAGE_TEMPLATES = [
    "My {device} {problem} since {day}.",
    "{system} {problem} for me, anyone else?",
    "Is {system} down? It {problem}.",
    "Update on the {device}: {fix}.",
    "{system} is back, {fix}.",
    "I opened ticket {ticket} for {system}.",
    "Ticket {ticket} is resolved, {fix}.",
    "Getting error {code} from {system} when I try to log in.",
    "Error {code} again on {system}, third time this week.",
    "Can someone reset my {system} password? I'm locked out.",
    "Deploying {project} to staging at {hour}, expect a short outage.",
    "The {project} release is delayed to {day} because of a failing migration.",
    "Code freeze for {project} starts {day} at {hour}.",
    "Who owns {system}? I need a review on a config change.",
    "{name} owns {system} now, ask them about access.",
    "Rollback of {project} done, {fix}.",
    "{customer} asked for a discount on the renewal, I said I'd check with {name}.",
    "{customer} signed the contract for {project}!",
    "Call with {customer} moved to {day} {hour}.",
    "{customer} complained that {system} {problem}.",
    "The {customer} renewal is due end of next month, {name} is on it.",
    "Lunch on {day} is {food} in {place}.",
    "There are leftover {food} in {place}, help yourselves.",
    "Reminder: {topic} is on {day} at {hour} in {place}.",
    "Slides for {topic} are on the wiki.",
    "I'll be out {day}, {name} covers for me.",
    "Welcome {name} who joins the {project} team today!",
    "Can we move the {topic} sync to {day}?",
    "Please submit your notes on {topic} by {day}.",
    "Heads up: {system} maintenance window {day} from {hour}.",
    "The {device} in {place} {problem}.",
    "Thanks {name}, {fix}.",
    "Does anyone know how to export a report from {system}?",
    "You can export from {system} under Settings, then Reports.",
    "Budget for {project} was approved, {name} will send details.",
    "{name} is presenting {project} at the all-hands on {day}.",
    "Incident {ticket}: {system} {problem}, investigating.",
    "Postmortem for {ticket} is scheduled for {day}.",
    "New laptops arrive {day}, tell {name} if you need one.",
    "Parking in {place} is closed on {day}.",
    "Did the {customer} invoice go out? Finance says {system} {problem}.",
    "Pinging {name} about {topic}.",
    "ok",
    "thanks!",
    "sounds good",
    "on it",
    "+1",
    "lol, same here",
    "I'll look into it after lunch.",
    "Can you send me the link?",
]

MEMORY_TEMPLATES = [
    "{name} prefers to be contacted on Slack rather than email.",
    "{name} owns {system} and approves access requests for it.",
    "{customer} renews every year in {month}; {name} is the account owner.",
    "{customer} is on the enterprise plan and has a dedicated support line.",
    "Error {code} in {system} usually means an expired certificate; reinstalling the client fixes it.",
    "The {project} team deploys on {day}s after the {hour} stand-up.",
    "{system} maintenance happens on the first {day} of each month.",
    "To reset a {system} password, use the self-service page, not a ticket.",
    "{name} works from {place} and is in the office on {day}s.",
    "{customer} asked never to be called before 10 am.",
    "Expense reports for {project} go to {name} for approval.",
    "The {device} in {place} is shared and must be booked in advance.",
    "{name} is allergic to nuts; order {food} without them for team lunches.",
    "Incidents on {system} are escalated to the {project} on-call rotation.",
    "{customer} complained twice about {system}; handle their tickets with priority.",
    "The {topic} happens every quarter and {name} runs it.",
]

ENTRY_TEMPLATES = [
    ("{name} {surname}", "person", "{role} in the {project} team, based in {place}."),
    ("{customer}", "organization", "Customer since {year}; account owner {name}; uses {system}."),
    ("{project}", "project", "Internal project run by {name}; depends on {system}."),
    ("{system} runbook", "system", "How to operate and recover {system}; owner {name}."),
    ("{topic} policy", "policy", "What the company expects about {topic}; maintained by {name}."),
]
SURNAMES = (
    "Martin Okafor Nguyen Smith Garcia Kowalski Rossi Tanaka Silva Cohen Haddad Novak Larsen Dubois "
    "Moreau Fischer Petrov Ali Kim Lopez"
).split()
ROLES = "engineer|designer|product manager|account executive|support lead|data analyst|SRE|recruiter".split(
    "|"
)
MONTHS = "January February March April May June July August September October November December".split()


class TextGen:
    def __init__(self, seed: int = 7):
        self.rng = random.Random(seed)

    def _slots(self) -> dict:
        r = self.rng
        return {
            "name": r.choice(FIRST).capitalize(),
            "surname": r.choice(SURNAMES),
            "system": r.choice(SYSTEMS),
            "device": r.choice(DEVICES),
            "problem": r.choice(PROBLEMS),
            "fix": r.choice(FIXES),
            "project": r.choice(PROJECTS),
            "customer": r.choice(CUSTOMERS),
            "place": r.choice(PLACES),
            "day": r.choice(DAYS),
            "food": r.choice(FOODS),
            "topic": r.choice(TOPICS),
            "hour": f"{r.randint(8, 17)}:{r.choice(['00', '15', '30', '45'])}",
            "ticket": f"{r.choice(['INC', 'REQ', 'CHG', 'SUP'])}-{r.randint(1000, 99999)}",
            "code": f"{r.choice(['E', 'ERR-', 'AUTH', '0x'])}{r.randint(100, 9999)}",
            "month": r.choice(MONTHS),
            "role": r.choice(ROLES),
            "year": r.randint(2012, 2025),
        }

    def speaker(self) -> str:
        return self.rng.choice(FIRST)

    def message(self) -> str:
        text = self.rng.choice(MESSAGE_TEMPLATES).format(**self._slots())
        if self.rng.random() < 0.25:  # some messages run on
            text += " " + self.rng.choice(MESSAGE_TEMPLATES).format(**self._slots())
        return text[0].upper() + text[1:]

    def memory(self) -> str:
        return self.rng.choice(MEMORY_TEMPLATES).format(**self._slots())

    def entry(self) -> tuple[str, str, str, list[str]]:
        """(name, type, summary, aliases)"""
        slots = self._slots()
        name, etype, summary = self.rng.choice(ENTRY_TEMPLATES)
        name = name.format(**slots)
        aliases = []
        if etype == "organization" and self.rng.random() < 0.5:
            aliases = ["".join(w[0] for w in name.split()).upper() + str(self.rng.randint(1, 99))]
        return f"{name} {self.rng.randint(1, 9999)}", etype, summary.format(**slots), aliases
