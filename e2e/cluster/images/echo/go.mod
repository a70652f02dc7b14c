module tidegate.test/echo

go 1.22
