from django.core.management import call_command

from knowledge.models import Message, PinnedMemo


def test_seed_demo_adds_conversations_and_a_memo_once(db):
    call_command("seed_demo", verbosity=0)
    count = Message.objects.count()
    assert count >= 10
    assert Message.objects.filter(channel__name="vpn-support", text__contains="AUTH-7731").exists()
    call_command("seed_demo", verbosity=0)
    assert Message.objects.count() == count
    assert PinnedMemo.objects.get(agent__name="copilot").version == 1
