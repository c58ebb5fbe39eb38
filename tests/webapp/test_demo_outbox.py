"""The demo prints the alert emails its alerts worker writes with Django's file backend (scripts/demo.py, Outbox)."""
from django.core.mail import send_mail

from scripts.demo import Outbox


def test_it_prints_an_emails_non_ascii_text_as_written(settings, tmp_path, capsys):
    settings.EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    settings.EMAIL_FILE_PATH = str(tmp_path)
    outbox = Outbox(tmp_path)
    send_mail("[Evolab] entropy −45% on café", "entropy fell −45% — to 0.21 × its start", "evolab@example.com",
              ["ada@example.com"])
    outbox.print_new()
    printed = capsys.readouterr().out
    assert "--- alert email to ada@example.com ---" in printed
    assert "Subject: [Evolab] entropy −45% on café" in printed
    assert "entropy fell −45% — to 0.21 × its start" in printed and "\\u2212" not in printed


def test_it_prints_each_email_once_and_none_from_before_it_started(settings, tmp_path, capsys):
    settings.EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    settings.EMAIL_FILE_PATH = str(tmp_path)
    send_mail("old", "sent before this start", "evolab@example.com", ["ada@example.com"])
    outbox = Outbox(tmp_path)
    send_mail("new", "sent after", "evolab@example.com", ["ada@example.com"])
    outbox.print_new()
    outbox.print_new()
    printed = capsys.readouterr().out
    assert printed.count("Subject: new") == 1 and "Subject: old" not in printed


def test_an_email_appended_to_a_file_printed_already_is_printed(settings, tmp_path, capsys):
    # the file backend names a file by the second and the connection's id: a later connection can reuse the name
    settings.EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    settings.EMAIL_FILE_PATH = str(tmp_path)
    outbox = Outbox(tmp_path)
    send_mail("first", "one", "evolab@example.com", ["ada@example.com"])
    outbox.print_new()
    (path,) = tmp_path.iterdir()
    with path.open("ab") as file:
        file.write(path.read_bytes())  # the same message again, as a second connection would append it
    outbox.print_new()
    assert capsys.readouterr().out.count("Subject: first") == 2
