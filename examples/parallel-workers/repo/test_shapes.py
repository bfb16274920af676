from shapes import square_area

def test_square_area():
    assert square_area(3) == 9
