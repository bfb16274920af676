from money import cents

def test_cents():
    assert cents(1.25) == 125
